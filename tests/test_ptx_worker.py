"""labkit.ptx's compiler process: out of the caller's process group (a Jupyter kernel's shutdown waits for the children
in its group), gone when the caller's end of its stdin closes, and never left half-way through a request."""

from __future__ import annotations

import os
import signal

import pytest

from labkit.cuda import ptx

SOURCE = "from numba import cuda\n\n@cuda.jit\ndef twice(x):\n    i = cuda.grid(1)\n    if i < x.size:\n        x[i] *= 2\n"


def _payload(name: str = "twice", source: str = SOURCE) -> dict:
    return {"source": source, "name": name, "signature": "void(float32[:])", "cc": (8, 0), "device": False}


@pytest.fixture
def fresh_worker() -> None:
    """A worker of this test's own (the one left running afterwards serves later tests)."""
    ptx._Worker.stop()


def test_the_worker_has_a_session_of_its_own_and_ends_when_its_stdin_closes(fresh_worker: None) -> None:
    assert ptx._Worker.request(_payload())["ok"]
    proc = ptx._Worker.proc
    assert proc is not None and proc.poll() is None
    assert os.getpgid(proc.pid) != os.getpgrp() and os.getsid(proc.pid) != os.getsid(0)
    proc.stdin.close()  # what the caller's exit does
    assert proc.wait(timeout=30) == 0


def test_an_interrupted_request_stops_the_worker_and_the_next_one_gets_its_own_reply(fresh_worker: None) -> None:
    assert ptx._Worker.request(_payload())["ok"]  # started, numba imported
    first = ptx._Worker.proc

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):  # a request the worker takes 5 s over (the source sleeps first)
            ptx._Worker.request(_payload(source="import time\ntime.sleep(5)\n" + SOURCE))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert ptx._Worker.proc is None and first is not None and first.poll() is not None
    reply = ptx._Worker.request(_payload("missing"))  # a reply that cannot be the interrupted request's
    assert not reply["ok"] and "missing" in reply["error"], reply
