"""Shared fixtures for the shuffler tests (imported by name; pytest puts this directory on
sys.path)."""
from __future__ import annotations

import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from shuffler import CrowdKey, Encoder, KeyPair


class Setup:
    def __init__(self, seed: int = 0, task: str = "task", epoch: int = 7, psize: int = 8) -> None:
        self.rand = insecure_deterministic_randomness(seed, "tests")
        self.s_keys = KeyPair.generate(self.rand)
        self.a_keys = KeyPair.generate(self.rand)
        self.master = self.rand.token_bytes(32)
        self.crowd = CrowdKey(self.master, task, epoch)
        self.encoder = Encoder(self.s_keys.public_key, self.a_keys.public_key, task, epoch,
                               psize, self.rand)
        self.context = self.encoder.context

    def encoder_for(self, task: str, epoch: int, psize: int | None = None) -> Encoder:
        return Encoder(self.s_keys.public_key, self.a_keys.public_key, task, epoch,
                       self.context.payload_size if psize is None else psize, self.rand)



def make_setup() -> Setup:
    return Setup()
