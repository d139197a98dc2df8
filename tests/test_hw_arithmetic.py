"""labkit.hw.arithmetic_rates: FP32 and FP64 results per clock per SM from the programming guide's throughput table
(lab 02's float-literal section). Cost: milliseconds."""

from __future__ import annotations

import pytest

from labkit import hw
from labkit.errors import LabkitError


@pytest.mark.parametrize("arch, fp32, fp64, ratio", [("sm_89", 128, 2, 64), ("L40S", 128, 2, 64), ("L4", 128, 2, 64),
                                                     ("sm_90", 128, 64, 2), ("H200", 128, 64, 2), ((8, 0), 64, 32, 2),
                                                     ("sm_86", 128, 2, 64), ("T4", 64, 2, 32), ("sm_70", 64, 32, 2)])
def test_rates_and_fraction(arch, fp32: int, fp64: int, ratio: int) -> None:
    r = hw.arithmetic_rates(arch)
    assert (r.fp32_per_clock.value, r.fp64_per_clock.value) == (fp32, fp64)
    assert round(1 / r.fp64_fraction) == ratio
    assert "Programming Guide" in r.fp64_per_clock.source and f"1/{ratio}" in str(r)


@pytest.mark.parametrize("bad", ["sm_61", "A6000", "", (9,)])
def test_unknown_architecture_is_a_labkit_error(bad) -> None:
    with pytest.raises(LabkitError, match="no FP32/FP64 throughput"):
        hw.arithmetic_rates(bad)
