"""The ClientApp mod: our secure aggregation in place of Flower's ``secaggplus_mod``.

Switching an app over is one line::

    from protocol.flower.secagg_mod import fedhh_secagg_mod
    app = ClientApp(client_fn=client_fn, mods=[fedhh_secagg_mod])   # was secaggplus_mod

with :class:`~protocol.flower.workflow.FedhhSecAggWorkflow` on the server. The mod
handles the ``TRAIN`` messages of our protocol (:mod:`protocol.flower.node`): at the
round whose next step is the masked input it runs the ClientApp's training
(``call_next``), quantises the updated parameters with the offered
:class:`~protocol.flower.session.Quantiser`, masks them, and clears the plaintext arrays
from the reply (the metrics and ``num_examples`` of the reply go to the server in the
clear, as with Flower's mod). A ``TRAIN`` message that is not part of a session is
refused (``allow_plaintext=False``): a server cannot make this node send its update in
the clear by leaving secure aggregation out. Other message types pass through.

The default is the malicious-server variant, which needs the node's PKI: the directory
(``write_pki``/``fedhh flower keys``) from the node config's ``fedhh-pki``, the mod's
``pki=``, or ``FEDHH_FLOWER_PKI``; the node's identity from ``fedhh-identity`` or, in
the simulation engine, ``partition-id``. :func:`make_secagg_mod` builds a mod with
another policy (``threat="semi-honest"`` needs no PKI).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from protocol.flower.node import NodeSession, handle, session_record
from protocol.flower.session import RECORD, FlowerSecAggError, Offer, Policy, Quantiser

__all__ = ["fedhh_secagg_mod", "make_secagg_mod", "FedhhSecAggMod", "FEDAVG_APP"]

#: the ``kind`` of the offer's application description for a FedAvg fit round
FEDAVG_APP = "fedavg"


def _check_fedavg(offer: Offer, _node_config: Any) -> tuple[Quantiser, list[tuple[int, ...]]]:
    doc = offer.app_json()
    if not isinstance(doc, dict) or set(doc) != {"kind", "shapes", "quantiser"} \
            or doc["kind"] != FEDAVG_APP:
        raise FlowerSecAggError("not a FedAvg offer")
    q = Quantiser.from_json(doc["quantiser"])
    q.check_nodes(offer.n)
    if q.modulus_range != offer.modulus:
        raise FlowerSecAggError("the quantiser's modulus is not the session's")
    shapes = doc["shapes"]
    if not isinstance(shapes, list) or not all(
            isinstance(s, list) and all(type(d) is int and d >= 0 for d in s) for s in shapes):
        raise FlowerSecAggError("the offer's shapes must be lists of non-negative ints")
    shapes = [tuple(s) for s in shapes]
    if 1 + sum(int(np.prod(s, dtype=np.int64)) for s in shapes) != offer.dim:
        raise FlowerSecAggError("the offer's shapes do not add up to its dimension")
    return q, shapes


def _fedavg_input(sess: NodeSession, msg: Any, ctxt: Any, *, call_next: Callable) -> tuple:
    """Train (the rest of the ClientApp), then quantise the update."""
    import flwr.compat.common.recorddict_compat as compat

    q, shapes = sess.app
    out = call_next(msg, ctxt)
    if out.has_error():
        raise FlowerSecAggError(f"training failed: {out.error.reason}")
    content = out.content
    fitres = compat.recorddict_to_fitres(content, keep_input=True)
    from flwr.common import parameters_to_ndarrays

    arrays = parameters_to_ndarrays(fitres.parameters)
    if [tuple(a.shape) for a in arrays] != shapes:
        raise FlowerSecAggError(f"the trained parameters have shapes "
                                f"{[a.shape for a in arrays]}, the offer {shapes}")
    vec = q.encode(arrays, float(fitres.num_examples))
    for arr_record in content.array_records.values():
        arr_record.clear()  # the update leaves the node only masked
    content.config_records.pop(RECORD, None)
    return vec, content


class FedhhSecAggMod:
    """A ClientApp mod with one node's policy (what :func:`make_secagg_mod` returns).

    A class at module level rather than a closure: Flower's simulation engine pickles
    the ClientApp, mods included, with every message it hands a Ray worker, and
    cloudpickle ships a closure by value (its code, 1.7 kB) but an instance of an
    importable class by reference (its class's name and its few fields), as it does
    Flower's own ``secaggplus_mod``.
    """

    __slots__ = ("policy", "pki", "allow_plaintext")

    def __init__(self, policy: Policy, pki: str | None, allow_plaintext: bool) -> None:
        self.policy = policy
        self.pki = pki
        self.allow_plaintext = allow_plaintext

    def __call__(self, msg: Any, ctxt: Any, call_next: Callable) -> Any:
        from flwr.app.message_type import MessageType

        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, ctxt)
        if session_record(msg.content.config_records, self.allow_plaintext) is None:
            return call_next(msg, ctxt)  # plaintext allowed by this node's option
        return handle(msg, ctxt, policy=self.policy, pki=self.pki, check_app=_check_fedavg,
                      make_input=functools.partial(_fedavg_input, call_next=call_next))

    def __repr__(self) -> str:
        return (f"FedhhSecAggMod(threat={self.policy.threat!r}, pki={self.pki!r}, "
                f"allow_plaintext={self.allow_plaintext})")


def make_secagg_mod(*, threat: str = "malicious", pki: str | None = None,
                    allow_plaintext: bool = False, **policy: Any) -> FedhhSecAggMod:
    """A mod with this node's policy (:class:`~protocol.flower.session.Policy`'s
    fields: ``threat``, ``corrupt_fraction``, ``dropout_rate``, ``graph``, ``sigma``,
    ``eta``), its PKI directory, and whether plaintext training requests pass.

    Raises:
        FlowerSecAggError: a bad policy.
    """
    return FedhhSecAggMod(Policy(threat=threat, **policy), pki, allow_plaintext)


#: the mod with the default policy (malicious server, PKI from the node config or
#: ``FEDHH_FLOWER_PKI``)
fedhh_secagg_mod = make_secagg_mod()
