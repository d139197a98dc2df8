"""Number formats and block scaling, exactly, on the CPU (no GPU code).

- :mod:`.precision`: FP32/TF32/FP16/BF16/FP8/FP4 and integer formats: bits, rounding, error, a GEMM in a format;
- :mod:`.scaling`: block scaling (MX formats, Transformer Engine's per-tensor scales).
"""
