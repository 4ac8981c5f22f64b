"""The one exception a study raises for bad input.

A runner (:mod:`protocol.studies.runners`) refuses a bad dataset, parameter or privacy
target with :class:`StudyError`; its message is written for the person who chose the
input (it names the command-line option when there is one). The command line prints
it as a usage error (exit status 2), a library caller catches it. The studies never
import the CLI.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

__all__ = ["StudyError", "ChoiceWarning", "mechanism_errors", "too_few_users",
           "smallest_population"]


class StudyError(Exception):
    """Bad input to a study: a dataset, a parameter or a privacy target it cannot use."""


class ChoiceWarning(UserWarning):
    """A choice the library made for the caller from the data (a frequency oracle's
    domain read off the items, ...): warned once per call and recorded in the
    result's ``input``, the API's counterpart of the command line's ``input:`` and
    ``warning:`` lines. ``warnings.simplefilter("error", ChoiceWarning)`` turns every
    such choice into an error."""


def smallest_population(ok: Callable[[int], bool], start: int = 2,
                        limit: int = 10 ** 13) -> int | None:
    """The smallest ``n >= start`` with ``ok(n)``, for an ``ok`` that fails below some
    population and holds from there on (a theorem's conditions on ``n``): doubling,
    then bisection. ``None`` when no ``n <= limit`` passes."""
    from mechanisms.triehh_privacy import first_passing

    return first_passing(ok, start - 1, max(start, 2), limit)


def too_few_users(left: str, needs: str, needed: int | None, why: str = "") -> StudyError:
    """The one message of every "too few users": what failed (``why``, the theorem's
    condition), the users ``left`` after what was dropped
    (:func:`protocol.studies.datasets.users_left`), and the minimum the mechanism
    needs (``needs``: the mechanism and its target, e.g. ``"TrieHH at epsilon 4"``)."""
    head = f"{why}; " if why else ""
    if needed is None:
        return StudyError(f"{head}{left}; {needs} cannot be met by any population")
    return StudyError(f"{head}{left}; {needs} needs at least {needed:,} users")


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
