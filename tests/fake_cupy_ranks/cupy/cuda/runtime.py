"""Fake cupy.cuda.runtime: as many devices as MPI_LOCALNRANKS says."""

import os

current = -1


def getDeviceCount() -> int:  # noqa: N802
    return int(os.environ.get("MPI_LOCALNRANKS", "1"))


def getDeviceProperties(index: int) -> dict:  # noqa: N802
    return {"name": b"Fake GPU"}
