"""`labkit doctor` inside JupyterLab (lab 00 runs it) does not send the learner to `make lab`."""

from __future__ import annotations

from labkit import doctor


def test_next_step_fits_where_doctor_runs(monkeypatch) -> None:
    monkeypatch.delenv("JPY_PARENT_PID", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    outside = " ".join(doctor.report()["next_steps"])
    assert "make lab" in outside
    monkeypatch.setenv("JPY_PARENT_PID", "1")  # what Jupyter sets for a notebook's kernel
    inside = " ".join(doctor.report()["next_steps"])
    assert "make lab" not in inside and "this JupyterLab" in inside
