"""Fake CuPy for rank processes: NumPy arrays that expose ``.data.ptr`` (see ../README.md)."""

from types import SimpleNamespace

import numpy as _np

from . import cuda  # noqa: F401


class ndarray(_np.ndarray):  # noqa: N801  (CuPy's name)
    @property
    def data(self):  # noqa: ANN201
        return SimpleNamespace(ptr=self.__array_interface__["data"][0])

    def get(self):  # noqa: ANN201
        return _np.asarray(self)


def asarray(a):  # noqa: ANN001, ANN201
    return _np.ascontiguousarray(a).view(ndarray)


def empty_like(a):  # noqa: ANN001, ANN201
    return _np.empty_like(_np.asarray(a)).view(ndarray)


def array_equal(a, b):  # noqa: ANN001, ANN201
    return asarray(_np.array(_np.array_equal(_np.asarray(a), _np.asarray(b))))
