"""Crowd ids that let the shuffler count equal items without learning them.

Theory of operation
-------------------
Prochlo's shuffler thresholds *crowds*: it forwards a report only if at least ``T``
reports carry the same crowd id (Bittau et al., SOSP 2017, section 3.5). If the crowd
id were the item itself (or an unkeyed hash of a small-domain item, e.g. a TrieHH
prefix), the shuffler would learn every item, including rare ones. Here the crowd id
is a keyed pseudorandom function of the item:

    crowd_key = HKDF-SHA256(salt = "fedhh/crowd/v1", ikm = master,
                            info = "fedhh/crowd/v1" || u16 len(task) || task || u64 epoch)
    crowd_id(item) = HMAC-SHA256(crowd_key, u32 len(item) || item)[:16]

``master`` is held by the clients and the analyzer, never by the shuffler. Equal items
in one (task, epoch) get equal ids, so the shuffler can count them; without the key
the ids of different items are indistinguishable from independent random 128-bit
strings (PRF security of HMAC-SHA256), and ids differ across tasks and epochs, so the
shuffler cannot link an item's crowd across rounds. An abstaining client draws a
uniformly random id: to anyone without ``master`` it looks exactly like a vote for an
item nobody else chose (a crowd of size one).

What each party learns (non-collusion of shuffler and analyzer assumed):
* shuffler: the number of crowds and each crowd's size, not which item a crowd is;
* analyzer: the items and full counts of crowds of size >= T only;
* shuffler + analyzer colluding: the analyzer can compute crowd_id(item) for every
  candidate, so together they learn every crowd's item and size (everything but the
  sender identity, which the shuffler saw). This design does not protect against it.

A client who knows ``master`` could also compute ids; since clients are the data
owners this leaks nothing new about other clients except through a client-shuffler
collusion, which equals the shuffler + analyzer case. Prochlo's blinded crowd ids
(two shufflers, ElGamal blinding) remove the need to trust clients with a key:
:mod:`shuffler.blinded` (``Encoder(blinded=True)``, ``Shuffler.close_blinded_batch``,
``CrowdShuffler``; see docs/shuffler.md).
"""
from __future__ import annotations

import hmac
import struct
from dataclasses import dataclass, field
from typing import Sequence

from .errors import ShufflerError
from .keys import RandomSource, hkdf_sha256
from .messages import CROWD_ID_BYTES

__all__ = ["CrowdKey", "random_crowd_ids"]

_LABEL = b"fedhh/crowd/v1"


@dataclass(frozen=True, slots=True)
class CrowdKey:
    """The per-(task, epoch) PRF key of crowd ids.

    Raises:
        ShufflerError: for a master key shorter than 32 bytes or a bad task/epoch.
    """

    master: bytes = field(repr=False)
    task: str
    epoch: int
    _key: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if type(self.master) is not bytes or len(self.master) < 32:
            raise ShufflerError("the crowd master key must be at least 32 bytes")
        if type(self.task) is not str or not self.task:
            raise ShufflerError("task must be a non-empty string")
        if type(self.epoch) is not int or not 0 <= self.epoch < 1 << 64:
            raise ShufflerError("epoch must be an int in [0, 2**64)")
        task_b = self.task.encode("utf-8")
        info = _LABEL + struct.pack(">H", len(task_b)) + task_b + struct.pack(">Q", self.epoch)
        object.__setattr__(self, "_key", hkdf_sha256(_LABEL, self.master, info))

    def crowd_id(self, item: bytes) -> bytes:
        """The 16-byte crowd id of ``item`` (deterministic within this task and epoch)."""
        if type(item) is not bytes:
            raise ShufflerError("an item is bytes")
        return hmac.digest(self._key, struct.pack(">I", len(item)) + item,
                           "sha256")[:CROWD_ID_BYTES]

    def crowd_ids(self, items: Sequence[bytes]) -> list[bytes]:
        """Crowd ids of many items (computed once per distinct item)."""
        cache: dict[bytes, bytes] = {}
        out = []
        for it in items:
            cid = cache.get(it)
            if cid is None:
                cid = cache[it] = self.crowd_id(it)
            out.append(cid)
        return out


def random_crowd_ids(n: int, rand: RandomSource) -> list[bytes]:
    """``n`` uniformly random crowd ids (abstentions, or a crowd-less report stream)."""
    blob = rand.token_bytes(n * CROWD_ID_BYTES)
    return [blob[i:i + CROWD_ID_BYTES] for i in range(0, n * CROWD_ID_BYTES, CROWD_ID_BYTES)]
