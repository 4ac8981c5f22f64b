"""Amplification by shuffling, per bound (:mod:`shuffler.amplification`): the central
epsilon of ``n`` shuffled epsilon0-LDP reports, or the inverse (``fedhh privacy shuffle``).
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from protocol.studies.errors import StudyError

__all__ = ["bound_table"]


def bound_table(n: int, x: float, delta: float, names: Sequence[str], *,
                inverse: bool = False) -> list[dict[str, Any]]:
    """One row per bound in ``names``: forward, the central epsilon for local
    ``x = epsilon0``; inverse, the largest epsilon0 for the central target ``x``.

    A row holds the bound, its source and validity, the value (key ``central_epsilon``
    forward, ``epsilon0`` inverse; ``None`` with an ``error`` outside the theorem's
    domain), ``trivial`` (the bound certifies nothing beyond the (epsilon0, 0)
    guarantee every shuffled epsilon0-LDP protocol has anyway), ``seconds`` and
    ``guarantee`` (the central guarantee as a :class:`mechanisms.privacy.PrivacyGuarantee`
    in JSON form, ``None`` without a value).

    Raises:
        StudyError: an argument the bound refuses.
    """
    from mechanisms.privacy import local_guarantee, shuffled
    from shuffler import amplification as amp

    call = amp.local_epsilon if inverse else amp.central_epsilon
    y_name = "epsilon0" if inverse else "central_epsilon"
    rows = []
    for name in names:
        info = amp.BOUNDS[name]
        t0 = time.perf_counter()
        try:
            value, error = call(n, x, delta, bound=name), None
        except amp.AmplificationDomainError as exc:
            value, error = None, f"outside the theorem: {exc}"
        except ValueError as exc:
            raise StudyError(str(exc)) from None
        # "trivial": the bound certifies nothing beyond the (epsilon0, 0) post-processing
        # guarantee that every shuffled epsilon0-LDP protocol has anyway
        trivial = value is not None and (value <= x if inverse else value >= x)
        seconds = round(time.perf_counter() - t0, 4)
        guarantee = None
        if value is not None:  # the central guarantee of n shuffled epsilon0-LDP reports
            eps0, central = (value, x) if inverse else (x, value)
            local = local_guarantee("shuffled reports", eps0, "any pure epsilon0-LDP randomiser")
            guarantee = shuffled(local, n, central, delta, name, info.source).to_json()
        rows.append({"bound": name, "source": info.source, "validity": info.validity,
                     y_name: value, "trivial": trivial, "error": error,
                     "seconds": seconds, "guarantee": guarantee})
    return rows
