"""Communication graphs of SecAgg+ (Bell et al., CCS 2020).

Theory of operation
-------------------
SecAgg+ replaces the complete graph of Bonawitz et al. by a sparse ``k``-regular graph:
a client shares keys, masks and Shamir shares only with its ``k`` neighbours, so the
client cost is ``O(k)`` instead of ``O(n)``. Bell et al. use the Harary graph
``H_{k,n}`` (the ``k``-connected graph with the fewest edges) with its nodes placed in a
random order: place the ``n`` clients on a ring in the order of a random permutation
``pi`` and connect every client to the ``k/2`` ring positions on each side::

    pos = pi^{-1}(i);   N(i) = { pi((pos + d) mod n) : d = +-1, ..., +-k/2 }

Because ``pi`` is uniformly random and independent of who is corrupted or drops out,
each client's neighbourhood is a uniformly random ``k``-subset of the others (the fact
:mod:`secagg.params` builds on).

Determinism: the permutation is a pure function of ``(n, seed)``: AES-256-CTR keyed by
``SHA-256("fedhh/secagg/v1" 0x00 "harary-permutation" 0x00 || u64(n) || seed)`` gives
one 64-bit key per node, and the nodes are sorted by key (stable sort, ties by index;
a tie has probability below ``n^2 / 2^65``). Every client recomputes the graph from the
public seed and checks its own neighbourhood; no global randomness is used.

Odd ``k`` below ``n - 1`` is rejected (a ``k``-regular graph on an odd number of nodes
does not exist for odd ``k``, and the ring construction is symmetric only for even
``k``); :func:`secagg.params.find_params` only returns even degrees. ``k >= n - 1``
means the complete graph.
"""
from __future__ import annotations

import functools
import hashlib
import struct
import weakref

import numpy as np

from .errors import ParameterError
from .prg import expand_mask

__all__ = ["harary_graph", "complete_graph", "complete_neighbours", "neighbours_of", "ring_order"]

_PERM_LABEL = b"fedhh/secagg/v1\x00harary-permutation\x00"


def _check(n: object, degree: object, seed: object) -> tuple[int, int, bytes]:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ParameterError(f"n must be an int >= 1, got {n!r}")
    if not isinstance(degree, int) or isinstance(degree, bool) or degree < 0:
        raise ParameterError(f"degree must be an int >= 0, got {degree!r}")
    if not isinstance(seed, (bytes, bytearray, memoryview)):
        raise ParameterError(f"seed must be bytes, got {type(seed).__name__}")
    if degree < n - 1 and degree % 2:
        raise ParameterError(f"degree must be even when below n - 1 (got degree {degree}, "
                             f"n {n})")
    return n, degree, bytes(seed)


@functools.lru_cache(maxsize=8)
def _ring_and_positions(n: int, seed: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Cached ``(ring, pos)`` with ``ring[pos[v]] == v``; read-only arrays.

    A pure function of its arguments, so caching is safe; it makes every client's
    :func:`neighbours_of` call O(k) after the first in a simulation.
    """
    key = hashlib.sha256(_PERM_LABEL + struct.pack(">Q", n) + seed).digest()
    sort_keys = expand_mask(key, n, 1 << 64)
    ring = np.argsort(sort_keys, kind="stable")
    pos = np.empty(n, np.int64)
    pos[ring] = np.arange(n)
    ring.setflags(write=False)
    pos.setflags(write=False)
    return ring, pos


def ring_order(n: int, seed: bytes) -> np.ndarray:
    """The pseudorandom ring: ``ring[p]`` is the node at ring position ``p``.

    Raises:
        ParameterError: ``n < 1`` or seed not bytes.
    """
    n, _, seed = _check(n, 0, seed)
    return _ring_and_positions(n, seed)[0].copy()


# One int object per participant index, shared by every neighbour tuple this process
# builds: a tuple of k indices then costs 8 bytes per entry instead of 36 (ints above 256
# are separate 28-byte objects), which a simulation holding n clients' neighbourhoods
# (and the server's n lists) feels.
_INDEX: list[int] = []


def _indices(values: object, n: int) -> tuple[int, ...]:
    """``tuple(values)`` (ints in ``[0, n)``) built from the shared index objects."""
    if len(_INDEX) < n:
        _INDEX.extend(range(len(_INDEX), n))
    return tuple(map(_INDEX.__getitem__, values))  # type: ignore[call-overload]


class _Graph(list):  # type: ignore[type-arg]
    """A graph's neighbour lists: a read-only ``list`` that can be referenced weakly.

    Read-only because a simulation's clients share its tuples (:func:`_recall`): a
    party that wants another graph assigns another list, it cannot edit this one
    under the others."""

    __slots__ = ("__weakref__",)

    def _read_only(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a graph's neighbour lists are read-only")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only  # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type, tuple[list[tuple[int, ...]]]]:
        return _Graph, (list(self),)


#: the graph last built by :func:`harary_graph` or :func:`complete_graph`, by its
#: arguments, while something else holds it (a weak reference): a simulation's clients
#: then take their neighbourhood tuples from the server's lists instead of building
#: their own copies (half the memory of the neighbourhoods), and nothing is kept
#: alive for it
_last: tuple[tuple[int, int, bytes], "weakref.ref[_Graph]"] | None = None


def _remember(key: tuple[int, int, bytes], graph: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    global _last
    g = _Graph(graph)
    _last = (key, weakref.ref(g))
    return g


def _recall(key: tuple[int, int, bytes], i: int) -> tuple[int, ...] | None:
    last = _last
    if last is None or last[0] != key:
        return None
    g = last[1]()
    return None if g is None else g[i]


def complete_graph(n: int) -> list[tuple[int, ...]]:
    """Neighbour lists of the complete graph on ``0..n-1`` (a read-only list: see
    :class:`_Graph`).

    Raises:
        ParameterError: ``n < 1``.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ParameterError(f"n must be an int >= 1, got {n!r}")
    everyone = _indices(range(n), n)
    return _remember((n, n - 1, b""), [everyone[:i] + everyone[i + 1:] for i in range(n)])


def complete_neighbours(i: int, n: int) -> tuple[int, ...]:
    """``complete_graph(n)[i]``: everyone but ``i``, sorted.

    Raises:
        ParameterError: ``n < 1`` or ``i`` not in ``[0, n)``.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ParameterError(f"n must be an int >= 1, got {n!r}")
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
        raise ParameterError(f"node index must be in [0, {n}), got {i!r}")
    known = _recall((n, n - 1, b""), i)
    return known if known is not None else _indices((j for j in range(n) if j != i), n)


def harary_graph(n: int, degree: int, seed: bytes) -> list[tuple[int, ...]]:
    """Neighbour lists of ``H_{degree,n}`` on the pseudorandom ring of ``seed``.

    Args:
        n: number of participants (indices ``0..n-1``).
        degree: even ``k < n - 1``, or ``k >= n - 1`` for the complete graph.
        seed: public seed (bytes) shared by all participants.

    Returns:
        ``graph[i]`` is the sorted tuple of the ``min(k, n - 1)`` neighbours of ``i``
        (a read-only list: :func:`neighbours_of` hands out its tuples while it lives;
        ``list(graph)`` is a copy to edit).

    Raises:
        ParameterError: bad ``n``, odd ``degree < n - 1``, or seed not bytes.
    """
    n, degree, seed = _check(n, degree, seed)
    if degree >= n - 1:
        return complete_graph(n)
    if degree == 0:
        return [() for _ in range(n)]
    key = (n, degree, seed)
    ring = _ring_and_positions(n, seed)[0]
    half = degree // 2
    offsets = np.concatenate([np.arange(-half, 0), np.arange(1, half + 1)])
    positions = np.arange(n)
    # row p: the nodes adjacent to the node at ring position p
    adj = ring[(positions[:, None] + offsets[None, :]) % n]
    adj.sort(axis=1)
    by_node = np.empty_like(adj)
    by_node[ring] = adj
    return _remember(key, [_indices(row, n) for row in by_node.tolist()])


def neighbours_of(i: int, n: int, degree: int, seed: bytes) -> tuple[int, ...]:
    """``harary_graph(n, degree, seed)[i]`` without building every list.

    Raises:
        ParameterError: ``i`` not in ``[0, n)`` or as :func:`harary_graph`.
    """
    n, degree, seed = _check(n, degree, seed)
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
        raise ParameterError(f"node index must be in [0, {n}), got {i!r}")
    if degree >= n - 1:
        return complete_neighbours(i, n)
    if degree == 0:
        return ()
    known = _recall((n, degree, seed), i)
    if known is not None:
        return known
    ring, positions = _ring_and_positions(n, seed)
    pos = int(positions[i])
    half = degree // 2
    offsets = np.concatenate([np.arange(-half, 0), np.arange(1, half + 1)])
    return _indices(sorted(ring[(pos + offsets) % n].tolist()), n)
