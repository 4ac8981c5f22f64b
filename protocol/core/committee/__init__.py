"""A three-party committee that compares secret-shared counts with a public threshold.

See :mod:`protocol.core.committee.rss` for the protocol and its guarantees.
"""
from protocol.core.committee.rss import (
    COMMITTEE, CommitteeAborted, CommitteeOutcome, CommitteeParty, Hook, ring_bits,
    run_committee,
)

__all__ = ["COMMITTEE", "CommitteeAborted", "CommitteeOutcome", "CommitteeParty", "Hook",
           "ring_bits", "run_committee"]
