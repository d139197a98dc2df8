"""CUDA C++ and PTX: the C++ stand-in that runs a learner's CUDA C++ on the CPU, NVRTC and ptxas compiles.

- :mod:`.cpp`: compile CUDA C++ (NVRTC on a GPU machine, the C++ stand-in in ``sim`` mode) and launch it;
- :mod:`.host`: the stand-in itself (the source compiled as C++ by the host compiler, with CUDA's built-ins);
- :mod:`.sources`: the course's CUDA C++ kernels (``labkit/kernels/cuda/*.cu``), compiled on demand;
- :mod:`.ptx`: PTX of a Numba kernel or of CUDA C++, and what it says (instructions, registers, spills).
"""

from pathlib import Path

#: The course's CUDA C++ sources (*.cu) and the stand-in's headers (host/*.h).
CUDA_DIR = Path(__file__).resolve().parents[1] / "kernels" / "cuda"
