"""labkit.figstyle: axes that label what a reader needs, and nothing in between."""

from __future__ import annotations

from labkit import figstyle as F


def test_log_axis_labels_powers_of_ten_over_decades_and_1_2_5_within_one() -> None:
    assert F.log_axis([0.01, 10_000])["dtick"] == 1
    within = F.log_axis([1.2e-9, 4.6e-9])
    assert within["ticktext"] == ["1.5e-09", "2e-09", "3e-09", "4e-09"] and "dtick" not in within
    assert F.log_axis([1, 1e6])["exponentformat"] == "power" and F.log_axis([0.01, 1e4])["exponentformat"] == "none"
    assert F.log_axis([1, 100], title="GB/s", range=[0, 2])["title"] == "GB/s"


def test_sizes_read_as_people_write_them() -> None:
    assert [F.human_bytes(n) for n in (512, 4096, 1048576, 1.5 * 2**20, 2**31)] == [
        "512 B", "4 KiB", "1 MiB", "1.5 MiB", "2 GiB"]
    axis = F.bytes_axis([4096, 64 * 2**20])
    assert axis["ticktext"][0] == "4 KiB" and "1 MiB" in axis["ticktext"] and len(axis["tickvals"]) <= 9
    assert all("M B" not in t and "." not in t for t in axis["ticktext"])


def test_count_axis_ticks_whole_numbers() -> None:
    assert F.count_axis(3)["dtick"] == 1 and F.count_axis(3)["tickformat"] == "d"
    assert F.count_axis(36)["dtick"] == 10 and F.count_axis(12)["dtick"] == 5
