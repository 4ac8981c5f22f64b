"""Runners: one module per mechanism that prepares, runs and summarises it.

A runner takes its options as a dataclass (or keyword arguments), a transport where
the mechanism aggregates through one, and an optional ``progress`` callable that wraps
an iterable of rounds (the CLI passes a progress bar). It returns JSON-ready
dictionaries and never prints; bad input raises
:class:`protocol.studies.errors.StudyError`.

* :mod:`.triehh` -- TrieHH (Zhu et al. 2020): one run, its benchmark, its parameter
  calculator; :mod:`.triehh_eval` repeats runs and writes CSV files and plots;
* :mod:`.triehhpp` -- TrieHH++ (Cormode 2021) and its parameter solver;
  :mod:`.quantiles` -- quantiles from the TrieHH++ trie;
* :mod:`.ldp` -- one local-DP frequency oracle;
* :mod:`.sfp` -- Apple's Sequence Fragment Puzzle;
* :mod:`.hh` -- PEM, AoN, SFP and TrieHH scored on the same populations;
* :mod:`.compare` -- TrieHH against SFP (Zhu et al. 2020, Table 2 and Figure 5);
* :mod:`.federated` -- TAPS, TAP, FedPEM and GTF, one run and the experiments;
* :mod:`.amplification` -- amplification-by-shuffling bounds, forward and inverse;
* :mod:`.demo` -- TrieHH over secure aggregation checked against plaintext;
* :mod:`.benchmarks` -- secure aggregation, shuffler, blinded crowds, frequency oracles.
"""
from __future__ import annotations

from protocol.core.contract import Transport
from protocol.studies.errors import StudyError

__all__ = ["default_transport"]


def default_transport(name: str) -> Transport:
    """The named transport (``plain``, ``secagg``, ``shuffler``) with its default options:
    keys from the operating system.

    Raises:
        StudyError: the transport is unknown, not importable or refuses the options.
    """
    from protocol.core.transports import get_transport

    opts = {} if name == "plain" else {"simulate": False}
    try:
        return get_transport(name, **opts)
    except ImportError as exc:
        raise StudyError(f"transport {name!r} is not available: {exc}. "
                         "Use --transport plain") from None
    except (ValueError, TypeError) as exc:
        raise StudyError(f"transport {name!r}: {exc}") from None
