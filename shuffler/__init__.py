"""fedhh.shuffler: the ESA / Prochlo pipeline (Encode, Shuffle, Analyze) as pure,
sans-I/O objects. See docs/shuffler.md.

Bittau et al., "Prochlo: Strong Privacy for Analytics in the Crowd", SOSP 2017.
"""
from .analyzer import AnalyzedBatch, Analyzer, decode_indices, encode_index
from .blinded import BlindedCrowdError, Blinder, DecryptorKey, encrypt_crowd
from .crowd import CrowdKey, random_crowd_ids
from .encoder import Encoder
from .errors import BatchTooSmall, EnvelopeRejected, RejectReason, ShufflerError
from .keys import KeyPair, OsRandom, PublicKey
from .messages import (
    AnalyzerEnvelope, Context, PlainReport, ShuffledBatch, ShuffleReceipt, ShufflerEnvelope,
)
from .thresholds import AnalyzerReceipt, analyzer_receipt
from .shuffler import (
    HardThreshold, NoisyThreshold, ShuffleOutput, Shuffler, noisy_threshold_delta,
    noisy_threshold_delta_floor, noisy_threshold_epsilon, uniform_permutation,
)

__all__ = [
    "AnalyzedBatch", "Analyzer", "decode_indices", "encode_index", "BlindedCrowdError",
    "Blinder", "DecryptorKey", "encrypt_crowd", "CrowdKey",
    "random_crowd_ids", "Encoder", "BatchTooSmall", "EnvelopeRejected", "RejectReason",
    "ShufflerError", "KeyPair", "OsRandom", "PublicKey", "AnalyzerEnvelope", "Context",
    "PlainReport", "ShuffledBatch", "ShuffleReceipt", "ShufflerEnvelope", "HardThreshold",
    "NoisyThreshold", "ShuffleOutput", "Shuffler", "noisy_threshold_delta",
    "noisy_threshold_delta_floor", "noisy_threshold_epsilon", "uniform_permutation",
    "AnalyzerReceipt", "analyzer_receipt",
]
