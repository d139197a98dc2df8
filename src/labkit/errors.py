"""Errors labkit raises, and how they are shown to a learner.

Every error that labkit raises on purpose is a :class:`LabkitError`: a short message that says
what went wrong and what to do. In a notebook, :func:`install_notebook_handler` makes IPython show
such an error as two plain lines instead of a traceback through labkit's insides.
"""

from __future__ import annotations

import sys
from typing import Any


class LabkitError(Exception):
    """A problem the learner can fix: the message says what happened and what to do next."""

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text}\n  What to do: {self.fix}" if self.fix else text


class ModeError(LabkitError):
    """The requested mode (``gpu`` or ``sim``) cannot be had in this Python process."""


class NoGPUError(LabkitError):
    """A section needs a GPU (or more than one) and this machine does not have it."""


class CompileError(LabkitError):
    """A kernel (Numba or CUDA C++) did not compile; the message carries the compiler's words and line."""


class MissingPackageError(LabkitError):
    """An optional package that this feature needs is not installed."""


def require(module: str, *, feature: str, install: str | None = None) -> Any:
    """Import ``module`` or raise :class:`MissingPackageError` naming the feature and the install command."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingPackageError(
            f"{feature} needs the package '{module}', which is not importable ({exc}).",
            fix=install or f"pip install {module}",
        ) from None


def _show_labkit_error(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> None:
    """IPython custom-exception hook: print a LabkitError without the traceback through labkit.

    An error that labkit gave a learner-only traceback (:func:`labkit.learner_frames.hide_library_frames`: a run of
    MPI processes that hung, an error from a kernel) shows the learner's own lines, then the same message."""
    render = getattr(value, "_render_traceback_", None)
    if callable(render):
        try:
            print("\n".join(render()), file=sys.stderr)
            return None
        except Exception:  # noqa: BLE001, S110 - the two plain lines below
            pass
    print(f"{etype.__name__}: {value}", file=sys.stderr)
    return None


def install_notebook_handler() -> bool:
    """In IPython, show every :class:`LabkitError` as a short message. Returns True when installed."""
    if "IPython" not in sys.modules:  # no IPython shell can be running: do not import it (0.3 s in every process)
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    shell.set_custom_exc((LabkitError,), _show_labkit_error)
    return True
