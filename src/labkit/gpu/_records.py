"""The plain-dict form of the GPU layer's result records (a timing, a traffic model, a Tensor Core run), as JSON,
gpu-check's report and the notebooks' tables take them."""

from __future__ import annotations

from typing import Any


def attribute_dict(record: Any, names: str) -> dict[str, Any]:
    """``{name: record.name}`` for each of the whitespace-separated ``names``, in that order (fields and properties)."""
    return {name: getattr(record, name) for name in names.split()}
