"""The one exception a study raises for bad input.

A runner (:mod:`protocol.studies.runners`) refuses a bad dataset, parameter or privacy
target with :class:`StudyError`; its message is written for the person who chose the
input (it names the command-line option when there is one). The command line prints
it as a usage error (exit status 2), a library caller catches it. The studies never
import the CLI.
"""
from __future__ import annotations

__all__ = ["StudyError"]


class StudyError(Exception):
    """Bad input to a study: a dataset, a parameter or a privacy target it cannot use."""
