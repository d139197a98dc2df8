"""Running and measuring on a GPU: CuPy helpers, timing, bandwidth, Tensor Cores.

- :mod:`.bench`: timing with CUDA events (simulator timings in ``sim`` mode), and the ``Timing`` it returns;
- :mod:`.bandwidth`: memory and link bandwidth, measured and modelled; :mod:`.spin`: a GPU kept busy on purpose;
- :mod:`.cupylab`: the CuPy side of labs 05-07 (streams, raw kernels, pipelines); :mod:`.errors`: CUDA errors in words;
- :mod:`.tensorcores`: WMMA and the GEMMs of lab 06.
"""
