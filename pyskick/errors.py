"""The one exception family for bad input: what the user gave is wrong, not pyskick.

``pyskick`` exits with status 2 and one line for a :class:`UserError` (a bad option value, a
damaged or missing file the user named, a refused request) and with status 1 for any other
exception, which is a runtime failure or a bug (``pyskick --debug`` shows its traceback).

:class:`UserError` subclasses :class:`ValueError`, so library callers that catch ``ValueError``
keep working; :class:`UserTypeError` and :class:`UserFileNotFoundError` are also the built-in
exception that code raised before (``TypeError``, ``FileNotFoundError``), for the same reason.
Raise a plain ``ValueError``/``TypeError`` for a broken internal invariant: the CLI reports it
as an internal error, not as the user's fault.
"""

from __future__ import annotations


class UserError(ValueError):
    """Bad input: a value, file or request the user can fix (exit 2 on the command line).

    The message is one line that names what was wrong.
    """


class UserTypeError(UserError, TypeError):
    """Bad input of the wrong type (e.g. a string where a config file needs a number)."""


class UserFileNotFoundError(UserError, FileNotFoundError):
    """A file or folder the user named does not exist."""


class GridShapeError(UserError):
    """Viewgrids of another shape than a model takes: the command that read them from a file
    names the file, the split and the model (``ModelConfig.check_grids`` knows none of them)."""
