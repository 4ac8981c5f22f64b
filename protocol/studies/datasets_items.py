"""Populations of integer items for the frequency oracles: synthetic Zipf and item files.

A population here is one array of item values in ``[0, domain)``, one per user (the
oracles of :mod:`mechanisms.fo` take it as is); ``-1`` marks a value outside the
domain, which an oracle with a dummy item maps to it. Word populations for the
heavy-hitter mechanisms are in :mod:`protocol.studies.datasets`.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["zipf_population", "file_population"]


def zipf_population(users: int, domain: int, s: float, rng: np.random.Generator) -> np.ndarray:
    """``users`` values in ``[0, domain)`` with ``P[i] proportional to 1/(i+1)^s``.

    Raises:
        ValueError: on non-positive sizes or a negative exponent.
    """
    if users < 1 or domain < 1:
        raise ValueError(f"need users >= 1 and domain >= 1, got {users}, {domain}")
    if s < 0 or not math.isfinite(s):
        raise ValueError(f"Zipf exponent must be finite and >= 0, got {s}")
    w = 1.0 / np.arange(1, domain + 1, dtype=float) ** s
    cdf = np.cumsum(w / w.sum())
    cdf[-1] = 1.0
    return np.searchsorted(cdf, rng.random(users), side="right").astype(np.int64)


def file_population(path: str, domain: int | None, users: int | None,
                    rng: np.random.Generator, notes: dict | None = None
                    ) -> tuple[np.ndarray, list[str], int]:
    """Read one item per line; return (values, names of the domain items, domain size).

    Items are ranked by frequency; values outside the top ``domain`` become ``-1``.
    ``notes`` (when given) receives what reading changed and chose: ``domain`` and
    ``domain_chosen`` (how the domain's items were read off the file:
    ``domain_from_data`` is always true for a file), ``blank_lines`` skipped,
    ``outside_domain`` (users whose item is not among the top ``domain``: they hold
    ``-1``), and with ``users`` the ``users_drawn`` from the file's ``lines`` and
    whether they were drawn ``with_replacement`` (more users than lines).

    Raises:
        ValueError: on an empty file or bad sizes.
        OSError: if the file cannot be read.
    """
    blank = 0
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") \
            from None
    # a byte-order mark is an encoding signature, not part of the first item; a CRLF
    # line end is a line end: both are dropped and counted, never kept in an item
    bom = text.startswith("\ufeff")
    text = text.removeprefix("\ufeff")
    crlf = text.count("\r\n")
    items = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.strip():
            items.append(line)
        else:
            blank += 1
    if text.endswith("\n") or not text:
        blank -= 1  # the last line end closes a line; no blank line follows it
    if not items:
        raise ValueError(f"{path}: no items")
    names, inverse, counts = np.unique(np.array(items, dtype=object), return_inverse=True,
                                       return_counts=True)
    order = np.argsort(-counts, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    values = rank[inverse].astype(np.int64)
    d = int(names.size) if domain is None else int(domain)
    if d < 1:
        raise ValueError("domain must be >= 1")
    values[values >= d] = -1
    lines = int(values.size)
    if users is not None:
        if users < 1:
            raise ValueError("users must be >= 1")
        values = rng.choice(values, size=users, replace=users > values.size)
    if notes is not None:
        notes.update({"blank_lines": blank, "lines": lines,
                      "byte_order_mark_removed": bom, "crlf_lines": crlf,
                      "outside_domain": int((values < 0).sum()),
                      # the domain's items are always read off the file (its distinct
                      # items, most frequent first); only their number may be given
                      "domain": d, "distinct_items": int(names.size),
                      "domain_from_data": True,
                      "domain_chosen": (f"the file's {int(names.size)} distinct items, most "
                                        "frequent first (no --domain)") if domain is None
                      else (f"the {d} most frequent of the file's {int(names.size)} "
                            "distinct items (--domain)")})
        if users is not None:
            notes.update({"users_drawn": int(users), "with_replacement": users > lines})
    return values, [str(names[i]) for i in order[:d]], d
