"""Errors users see. Bad input becomes one line naming the file, the place and the problem."""

from __future__ import annotations

import os

__all__ = ["InputError", "MissingExtraError", "RlvitalsError"]


class RlvitalsError(Exception):
    """Base class of every error rlvitals raises on purpose."""


class InputError(RlvitalsError, ValueError):
    """Bad input: a file that cannot be read as what it claims to be.

    Args:
        path: the file or directory at fault.
        problem: what is wrong, in a few words.
        where: ``"line 12"``, ``"byte 4096"``, ``"record 3"``; optional.

    ``str(err)`` is the one line the CLI prints: ``path:line 12: problem``.
    """

    def __init__(self, path: str | os.PathLike | None, problem: str, where: str | None = None):
        self.path = None if path is None else os.fspath(path)
        self.problem = problem
        self.where = where
        parts = [p for p in (self.path, where) if p]
        prefix = ":".join(parts)
        super().__init__(f"{prefix}: {problem}" if prefix else problem)


class MissingExtraError(RlvitalsError, ImportError):
    """An optional feature whose dependencies are not installed; says what to install.

    rlvitals is installed from its repository, not from a package index (docs/install.md), so
    the command is the checkout's:

    >>> print(MissingExtraError("reading parquet", "parquet", "pyarrow"))
    reading parquet needs the 'pyarrow' package (the rlvitals[parquet] extra): pip install -e '.[parquet]' in an rlvitals checkout (docs/install.md)
    """

    def __init__(self, feature: str, extra: str, module: str):
        super().__init__(
            f"{feature} needs the '{module}' package (the rlvitals[{extra}] extra): "
            f"pip install -e '.[{extra}]' in an rlvitals checkout (docs/install.md)"
        )
        self.extra = extra
