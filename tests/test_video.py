"""labkit.video: the synthetic video, the NumPy reference pipeline, stage costs, timings and figures."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)

from labkit import video  # noqa: E402
from labkit.errors import LabkitError  # noqa: E402


def test_generator_is_deterministic() -> None:
    a, b = video.synthetic_video(5, (32, 48), seed=3), video.synthetic_video(5, (32, 48), seed=3)
    assert a.frames.dtype == np.uint8 and a.frames.shape == (5, 32, 48)
    np.testing.assert_array_equal(a.frames, b.frames)
    assert a.truth == b.truth
    assert not np.array_equal(a.frames, video.synthetic_video(5, (32, 48), seed=4).frames)
    assert a.truth[0] == [] and len(a.truth[1]) == 3  # the scene starts empty


def test_generator_drift_and_errors() -> None:
    v = video.synthetic_video(30, (24, 32), seed=0, n_objects=0, noise=0.0, drift=1.0)
    assert int(v.frames[29].astype(int).mean() - v.frames[0].astype(int).mean()) == 29
    for bad in [dict(n_frames=0), dict(shape=(4, 4)), dict(shape=7), dict(n_objects=-1)]:
        kwargs = {"n_frames": 3, **bad}
        with pytest.raises(LabkitError):
            video.synthetic_video(**kwargs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_finds_movers_not_the_background(seed: int) -> None:
    v = video.synthetic_video(10, (48, 64), seed=seed)
    r = video.run_reference(v, tile=4)
    assert r.masks.shape == v.frames.shape and r.counts.shape == (10, 12, 16)
    assert r.boxes[0] == [] and r.motion_pixels[0] == 0
    near = np.zeros(v.frames.shape, bool)  # every pixel within 4 of where an object is or has been lately
    for t in range(len(v)):
        for s in range(max(0, t - 4), t + 1):
            for r0, r1, c0, c1 in v.truth[s]:
                near[t, max(r0 - 4, 0) : r1 + 4, max(c0 - 4, 0) : c1 + 4] = True
    assert not r.masks[~near].any()  # the static scene, noise and lighting drift never show
    for t in range(1, len(v)):
        for r0, r1, c0, c1 in v.truth[t]:  # every object is covered by a found box
            assert r.masks[t, r0:r1, c0:c1].mean() > 0.3
            assert any(b0 < r1 and r0 < b1 and d0 < c1 and c0 < d1 for b0, b1, d0, d1 in r.boxes[t])


def test_static_frame_difference_fails_under_drift() -> None:
    v = video.synthetic_video(60, (24, 32), seed=0, n_objects=0, drift=0.6)
    r = video.run_reference(v, tile=4)
    assert r.motion_pixels.sum() == 0  # the running average follows the light
    frozen = video.run_reference(v, alpha=0.0, tile=4)  # a background that never learns
    assert frozen.motion_pixels[-1] > 0.9 * 24 * 32


def test_stages_pieces() -> None:
    m = np.ones((5, 7), np.uint8)
    np.testing.assert_array_equal(video.erode(m), m)  # outside the frame is ignored
    m[2, 3] = 0
    e = video.erode(m)
    assert e[1:4, 2:5].sum() == 0 and e.sum() == 35 - 9
    d = video.dilate(1 - m)
    assert d.sum() == 9
    c = video.tile_counts(np.ones((10, 9), np.uint8), 4)
    np.testing.assert_array_equal(c, [[16, 16, 4], [16, 16, 4], [8, 8, 2]])
    bg = np.full((2, 2), 100, np.float32)
    mask = video.fused_step(np.array([[100, 130], [60, 126]], np.uint8), bg, 0.5, 25.0)
    np.testing.assert_array_equal(mask, [[0, 1], [1, 1]])
    np.testing.assert_allclose(bg, [[100, 115], [80, 113]])
    assert video.regions(np.array([[20, 0, 17], [20, 0, 9]]), 8, (16, 20)) == [(0, 16, 0, 8), (0, 8, 16, 20)]


def test_costs_and_bounds() -> None:
    s = video.stage("fused")
    assert (s.bytes_per_pixel, s.ops_per_pixel, s.intensity) == (10, 5, 0.5)
    assert s.bytes(1080 * 1920) == 10 * 1080 * 1920
    assert video.stage("erode").bytes_per_pixel == 2 and video.stage("count").intensity == 1
    with pytest.raises(LabkitError, match="Did you mean 'erode'"):
        video.stage("erod")
    table = video.stage_table("H200")
    assert table.count("memory-bound") == 4 and "ridge 13.9" in table


def test_kernels_match_reference_and_timings_are_labelled() -> None:
    v = video.synthetic_video(3, (16, 24), seed=5)
    got = video.run_kernels(v, tile=4, block=(16, 8))
    assert "simulator" in video.compare_results(got, video.run_reference(v, tile=4))
    ts = video.time_stages(shape=(16, 24), tile=4)
    assert [t.name for t in ts] == [s.name for s in video.STAGES.values()]
    assert all("not GPU speed" in t.label and t.bytes for t in ts)
    cpu = video.time_reference((16, 24), tile=4, repeat=2)
    assert all(t.mode == "cpu" and "not GPU speed" in t.label for t in cpu)
    assert all(m is None for _, _, m in video.roofline_points(ts))  # simulator times are never placed as GPU rates


def test_figures_build() -> None:
    v = video.synthetic_video(4, (24, 32), seed=0)
    r = video.run_reference(v, tile=4)
    fig = video.frames_figure(v, r, index=3)
    assert len(fig.data) == 3 and len(fig.layout.shapes) >= 3
    assert len(video.frames_figure(v).data) == 1
    assert len(video.activity_figure(r).data) == 2
    rf = video.roofline_figure("H200")
    assert "model only" in rf.layout.title.text and len(rf.data) == 2 + 4
    with pytest.raises(LabkitError):
        video.run_reference(np.zeros((2, 8, 8), np.float32))
