"""Poplar1 (draft-irtf-cfrg-vdaf-20): the IETF's verifiable distributed aggregation
function for private heavy hitters (Boneh, Boyle, Corrigan-Gibbs, Gilboa, Ishai,
"Lightweight Techniques for Private Heavy Hitters", IEEE S&P 2021), as a sans-I/O,
batched core: fields (:mod:`.field`), XOFs (:mod:`.xof`), the IDPF (:mod:`.idpf`) and
the VDAF (:mod:`.vdaf`). No I/O, clock or global randomness: the caller passes the
clients' random bytes and the aggregators' verify key. Everything it refuses raises a
:class:`~.errors.Poplar1Error`.
"""
from __future__ import annotations

from protocol.core.poplar1.errors import (Poplar1DecodeError, Poplar1Error, Poplar1UsageError,
                                          Poplar1VerificationError)
from protocol.core.poplar1.vdaf import (AggParam, Aggregator, InputShares, Poplar1, Reports,
                                        decode_agg_param, encode_agg_param, is_valid,
                                        sketch_accepts, sketch_message, verify_one)

#: the draft whose Poplar1 this package implements (and whose test vectors it passes)
DRAFT = "draft-irtf-cfrg-vdaf-20"

__all__ = ["DRAFT", "Poplar1", "Aggregator", "InputShares", "Reports", "AggParam",
           "is_valid", "encode_agg_param", "decode_agg_param", "sketch_message",
           "sketch_accepts", "verify_one", "Poplar1Error", "Poplar1DecodeError",
           "Poplar1UsageError", "Poplar1VerificationError"]
