"""Rehearsal (issue 29, B3): lab 08's ``ranks.call`` on the image's mpi4py (no MPI library of its own) with MPICH
brought the way the run brings it: the wheelhouse's ``mpi/`` wheel installed with ``--prefix``, on PATH and
LD_LIBRARY_PATH (tools/install_wheelhouse.sh). Without that, ``ranks.available()`` says why in words."""

from __future__ import annotations

from rehearsal_env import needs_rehearsal, run_json

pytestmark = needs_rehearsal

HELLO = """
import json
from labkit import ranks

def hello(comm):
    return f"rank {comm.Get_rank()} of {comm.Get_size()}"

ok, why = ranks.available()
values = ranks.call(hello, 4).values if ok else None
print(json.dumps({"ok": ok, "why": why, "values": values}))
"""


def test_b3_ranks_call_with_mpich_brought_by_the_run() -> None:
    out = run_json(HELLO, LABKIT_MODE="sim", LABKIT_MAX_RANKS="4")
    assert out["ok"], out["why"]
    assert out["values"] == [f"rank {r} of 4" for r in range(4)]


def test_b3_without_the_mpi_library_the_reason_is_said() -> None:
    """The image as it is (mpi4py, no library, no mpiexec): available() is False and says what is missing; with an
    mpiexec on PATH but no library on the loader's path, it names the library (``mpi4py.MPI`` is what fails)."""
    out = run_json(HELLO, mpi=False, LABKIT_MODE="sim")
    assert out["ok"] is False and "mpiexec" in out["why"], out
    from rehearsal_env import VENV

    out = run_json(HELLO, mpi=False, LABKIT_MODE="sim", PATH=f"{VENV / 'mpi' / 'bin'}:/usr/bin:/bin")
    assert out["ok"] is False and "no MPI library" in out["why"] and "LD_LIBRARY_PATH" in out["why"], out
