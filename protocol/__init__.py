"""fedhh.protocol, in three layers (docs/architecture.md):

* :mod:`protocol.core` -- the aggregation contract, randomness, wire codec, transports
  and simulation engine; the only code that knows bytes on a wire, processes and time;
* :mod:`protocol.studies` -- runners, datasets, evaluation, audits, the attack catalogue;
* :mod:`protocol.cli` -- the ``fedhh`` command line (parsing and printing only).
"""
