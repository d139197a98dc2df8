"""labkit/data/exercises.yml holds every exercise's words (title, hints) and the data some checks read (fixed cases,
slips as factors of the right figure); these tests keep it and the registered checks in step."""

from __future__ import annotations

import ast
from fractions import Fraction
from pathlib import Path

import pytest

from labkit.check import core

CHECK_DIR = Path(core.__file__).parent


def _entries() -> dict:
    core.exercise_data("00.vector-add")  # reads the file once
    assert core._TEXTS is not None
    return core._TEXTS


def test_every_registered_exercise_has_an_entry_and_every_entry_an_exercise() -> None:
    core._load_all()
    assert set(_entries()) == set(core._REGISTRY)


def test_entries_hold_only_known_keys_with_three_hints() -> None:
    for ex_id, entry in _entries().items():
        assert set(entry) <= {"title", "hints", "cases", "slips"}, ex_id
        assert isinstance(entry["title"], str) and entry["title"], ex_id
        assert len(entry["hints"]) >= 2 and all(isinstance(h, str) and h for h in entry["hints"]), ex_id


def test_the_words_are_in_the_data_file_only() -> None:
    """No check module gives an exercise's title or hints in code: there is one place to edit them."""
    for path in sorted(CHECK_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "exercise":
                given = {k.arg for k in node.keywords} & {"title", "hints"}
                assert not given, f"{path.name}:{node.lineno} passes {given}; put them in labkit/data/exercises.yml"


def test_listed_slips_are_fractions_with_a_cause() -> None:
    listed = {ex: e["slips"] for ex, e in _entries().items() if "slips" in e}
    assert listed
    for ex_id, slips in listed.items():
        for factor, cause in slips.items():
            assert Fraction(str(factor)) not in (0, 1), (ex_id, factor)
            assert isinstance(cause, str) and cause, (ex_id, factor)


def test_an_exercise_without_an_entry_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="99.nowhere"):
        core.exercise("99.nowhere")


def test_drawn_reads_the_draws_by_name_in_order() -> None:
    import numpy as np

    from labkit.check import draws, replay

    spec = [[{"not_multiple": [9, 20, 8]}, {"times": 32, "between": [1, 2]}], [16, 8]]
    saved = replay.DRAWS._gen  # (what harness.rng() hands out draws from)
    try:
        replay.DRAWS._gen = np.random.default_rng(7)
        got = draws.drawn(spec)
        replay.DRAWS._gen = np.random.default_rng(7)
        want = ((draws.not_multiple(9, 20, 8), 32 * draws.between(1, 2)), (16, 8))
    finally:
        replay.DRAWS._gen = saved
    assert got == want and got[0][0] % 8 and got[0][1] in (32, 64)
    with pytest.raises(KeyError):
        draws.drawn({"choice": [1, 2]})


def test_every_listed_case_table_draws() -> None:
    from labkit.check.draws import drawn

    for ex_id, entry in _entries().items():
        for case in entry.get("cases", ()):
            assert isinstance(drawn(case), tuple), (ex_id, case)
