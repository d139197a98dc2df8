"""What several explorers take as a choice of records: one name, or a list of them (at least one)."""

from __future__ import annotations

from typing import Any

from ..validate import require_sequence


def one_or_more_names(value: Any, name: str, *, what: str, fix: str) -> list[Any]:
    """``value`` (one name as a string, or a list of names) as a list of at least one; a LabkitError naming
    ``name``, ``what`` it must be and the ``fix`` otherwise. The names are not looked up here."""
    return require_sequence([value] if isinstance(value, str) else value, name, min_len=1, what=what, fix=fix)
