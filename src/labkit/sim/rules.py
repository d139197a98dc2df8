"""The course's rules for Numba's CUDA simulator, installed once: every launch through labkit's engine
(:mod:`.launch`), 32-bit integer arithmetic (:mod:`.integers`) and warp-level calls (:mod:`.warp`)."""

from __future__ import annotations


def install() -> bool:
    """Install the course's rules into Numba's simulator. Returns False outside the simulator (a no-op)."""
    from . import integers, warp
    from .launch import install as install_launches

    if not warp.is_simulator():
        return False
    install_launches()
    integers.install()
    warp.install()
    return True
