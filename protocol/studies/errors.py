"""The one exception a study raises for bad input.

A runner (:mod:`protocol.studies.runners`) refuses a bad dataset, parameter or privacy
target with :class:`StudyError`; its message is written for the person who chose the
input (it names the command-line option when there is one). The command line prints
it as a usage error (exit status 2), a library caller catches it. The studies never
import the CLI.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = ["StudyError", "mechanism_errors"]


class StudyError(Exception):
    """Bad input to a study: a dataset, a parameter or a privacy target it cannot use."""


@contextlib.contextmanager
def mechanism_errors(what: str, transport: str | None) -> Iterator[None]:
    """Turn what a mechanism run over a transport raises into one-line
    :class:`StudyError` messages:

    * a parameter the mechanism refuses (``PrefixTreeError`` and its ``LevelError`` /
      ``FederatedError``, the oracles' ``OracleInputError``): its own message;
    * contributions the transport cannot carry (``ContractError``, ``ReportError``):
      ``"{what} over --transport {transport}: ..."`` (``"{what} in process: ..."`` when
      ``transport`` is ``None``: the mechanism aggregated without one);
    * an aborted round (``AggregationAborted``): ``"the {transport} transport aborted
      {what}: ..."``.
    """
    from mechanisms.fo.base import OracleInputError, ReportError
    from mechanisms.prefix_tree import PrefixTreeError
    from protocol.core.contract import AggregationAborted, ContractError

    try:
        yield
    except (PrefixTreeError, OracleInputError) as exc:
        raise StudyError(str(exc)) from None
    except (ContractError, ReportError) as exc:
        where = "in process" if transport is None else f"over --transport {transport}"
        raise StudyError(f"{what} {where}: {exc}") from None
    except AggregationAborted as exc:
        raise StudyError(f"the {transport} transport aborted {what}: {exc}") from None
