"""Errors that name the argument at fault as the caller wrote it, for the tabular readers.

:class:`ArgumentError` is a ``ValueError`` that knows which argument was at fault, so that a
command line can word the same message with its own flag; :class:`ArgumentFileNotFoundError` is
also a ``FileNotFoundError``. :func:`check_unique_names` raises one for repeated column names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pandas as pd

__all__ = ["ArgumentError", "ArgumentFileNotFoundError", "check_unique_names"]


def _shown(value: object) -> str:
    """A short, unambiguous rendering of an argument's value for a message."""
    if isinstance(value, pd.DataFrame):
        return f"<DataFrame of {value.shape[0]} rows x {value.shape[1]} columns>"
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return repr(value)


class ArgumentError(ValueError):
    """Bad input traced to one argument, with a message that names it as the caller wrote it.

    The message is ``template.format(arg=..., given=..., **details)``. ``{arg}`` is the
    argument's name and ``{given}`` the name with the value passed, spelled for a library call
    (``positive=``, ``positive='q'``) unless :meth:`for_flags` maps the argument to a flag of the
    command line (``--target``, ``--target 'y'``) or a config key (``config.data.positive``,
    ``config.data.positive='q'``). The details are inserted as values, so data in them (braces
    included) never changes the template.

    Attributes:
      argument: the library argument at fault (``"target"``, ``"positive"``, ``"path"``, ...).
      value: the value it was given.
      flag: the command-line flag standing for it, or None for a library call.
    """

    def __init__(
        self, argument: str, value: object, template: str, *, flag: str | None = None, **details
    ) -> None:
        self.argument = argument
        self.value = value
        self.template = template
        self.details = details
        self.flag = flag
        super().__init__(self._message())

    def _message(self) -> str:
        if self.flag is None:
            arg, given = f"{self.argument}=", f"{self.argument}={_shown(self.value)}"
        else:
            arg = self.flag
            sep = " " if self.flag.startswith("--") else "="  # a flag, or a config key
            given = self.flag if self.value is None else f"{self.flag}{sep}{_shown(self.value)}"
        return self.template.format(arg=arg, given=given, **self.details)

    def renamed(self, argument: str, value: object) -> ArgumentError:
        """The same error, charged to ``argument`` of a caller that passed ``value`` for it."""
        return type(self)(argument, value, self.template, flag=self.flag, **self.details)

    def for_flags(self, flags: Mapping[str, str]) -> ArgumentError:
        """The same error worded with the command-line flag that ``flags`` maps its argument to
        (itself when ``flags`` does not name that argument)."""
        if self.argument not in flags:
            return self
        return type(self)(
            self.argument, self.value, self.template, flag=flags[self.argument], **self.details
        )


class ArgumentFileNotFoundError(ArgumentError, FileNotFoundError):
    """A file named by an argument does not exist (also a ``FileNotFoundError``)."""


def check_unique_names(names: Sequence[object], argument: str, value: object) -> None:
    seen, repeated = set(), []
    for name in names:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    if repeated:
        raise ArgumentError(
            argument, value, "{given}: column names repeat: {repeated}", repeated=repeated
        )
