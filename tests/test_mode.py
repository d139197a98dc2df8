"""labkit.setup(): mode choice, forcing, repeated calls, and the numba-imported-first case."""

import subprocess
import sys
import textwrap

import pytest

import labkit
from labkit import mode
from labkit.errors import ModeError


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    import os

    full_env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_MODE", "NUMBA_ENABLE_CUDASIM")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=120)


def test_sim_mode_here() -> None:
    e = labkit.env()
    assert e.mode == "sim" and not e.is_gpu
    assert "sim mode" in e.banner() and "never GPU speed" in e.banner()
    assert labkit.xp.__name__ == "numpy"
    assert labkit.size(gpu=10**8, sim=100) == 100


def test_setup_twice_is_harmless(capsys: pytest.CaptureFixture) -> None:
    assert labkit.setup() is labkit.setup(quiet=True)
    assert "labkit sim mode" in capsys.readouterr().out


def test_switching_mode_in_a_kernel_is_an_error() -> None:
    with pytest.raises(ModeError, match="Restart the kernel"):
        labkit.setup("gpu")


def test_auto_detects_sim_without_driver() -> None:
    proc = _run("import labkit, os; e = labkit.setup(); print(e.mode, os.environ['NUMBA_ENABLE_CUDASIM'])")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "sim 1"


def test_forcing_gpu_without_gpu_is_one_clear_error() -> None:
    proc = _run("""
        import labkit
        try:
            labkit.setup()
        except labkit.LabkitError as e:
            print("ERR", type(e).__name__, e)
    """, LABKIT_MODE="gpu")
    assert "ERR ModeError gpu mode was forced" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_unknown_mode_value() -> None:
    proc = _run("import labkit\ntry:\n    labkit.setup()\nexcept labkit.LabkitError as e:\n    print('ERR', e)", LABKIT_MODE="fast")
    assert "is not a mode" in proc.stdout


def test_numba_imported_first_asks_for_restart() -> None:
    proc = _run("""
        from numba import cuda   # the real CUDA target (no simulator): sim mode is impossible now
        import labkit
        try:
            labkit.setup()
        except labkit.LabkitError as e:
            print("ERR", e)
    """)
    assert "ERR numba's CUDA target was imported before labkit.setup()" in proc.stdout
    assert "Restart the kernel" in proc.stdout


def test_numba_core_imported_first_is_fine() -> None:
    proc = _run("import numba\nimport labkit\ne = labkit.setup(quiet=True)\nfrom numba import cuda\nprint(e.mode, cuda.simulator_init is not None)")
    assert proc.stdout.split() == ["sim", "True"], proc.stderr


def test_notebook_handler_hides_labkit_tracebacks() -> None:
    from labkit.errors import LabkitError, _show_labkit_error

    class Shell:
        pass

    import io
    import contextlib

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        _show_labkit_error(Shell(), LabkitError, LabkitError("bad thing", fix="do this"), None)
    assert buf.getvalue() == "LabkitError: bad thing\n  What to do: do this\n"


def test_environment_as_dict() -> None:
    d = mode.env().as_dict()
    assert d["mode"] == "sim" and d["gpus"] == []


# ---------------------------------------------------------------------------------------------- choosing gpu mode (issue 11)

from labkit import device  # noqa: E402
from labkit.device import DriverProbe, GPUInfo  # noqa: E402


class _FakeLibcuda:
    """libcuda's C entry points as ctypes calls them (pointers arrive as ctypes.byref objects); names checked
    against cuda-bindings' driver API in test_gpu_api_surface.py."""

    def __init__(self, names: list[str], version: int = 12080, count_error: int = 0) -> None:
        self.names, self.version, self.count_error = names, version, count_error
        self.initialised = False

    def cuDriverGetVersion(self, out): out._obj.value = self.version; return 0
    def cuInit(self, flags): self.initialised = True; return 0

    def cuDeviceGetCount(self, out):
        out._obj.value = len(self.names)
        return self.count_error

    def cuDeviceGet(self, out, i): out._obj.value = i; return 0
    def cuDeviceGetName(self, buf, n, dev): buf.value = self.names[dev.value].encode(); return 0

    def cuDeviceGetAttribute(self, out, code, dev):
        out._obj.value = {16: 16 if "MIG" in self.names[dev.value] else 132, 75: 9, 76: 0, 38: 50 << 20, 33: 0x19 + dev.value,
                          34: 0, 50: 0}[code]
        return 0

    def cuDeviceTotalMem_v2(self, out, dev): out._obj.value = (10 if "MIG" in self.names[dev.value] else 140) << 30; return 0

    def cuDeviceGetUuid_v2(self, out, dev):
        for k in range(16):
            out._obj.bytes[k] = (dev.value * 16 + k) & 0xFF
        return 0

    def cuDeviceGetPCIBusId(self, buf, n, dev): buf.value = f"0000:{0x19 + dev.value:02X}:00.0".encode(); return 0


def test_probe_reads_uuid_and_bus_id_for_matching_with_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    p = device.probe_driver(_FakeLibcuda(["NVIDIA H200", "NVIDIA H200"]))
    assert p.usable and p.driver_version == "12.8" and p.driver_major == 12
    g0, g1 = p.gpus
    assert g0.uuid == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f" and g1.uuid.startswith("GPU-10111213")
    assert g0.pci_bus_id == "0000:19:00.0" and g1.pci_bus_id == "0000:1a:00.0" and not g0.mig
    assert device.normalise_bus_id("00000000:1A:00.0") == g1.pci_bus_id  # NVML's spelling


def test_empty_cuda_visible_devices_gives_sim_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    lib = _FakeLibcuda(["NVIDIA H200"])
    p = device.probe_driver(lib)
    assert not p.usable and 'CUDA_VISIBLE_DEVICES=""' in p.reason and not lib.initialised
    monkeypatch.setattr(mode, "probe_driver", lambda: p)
    chosen, reason, gpus, driver = mode._decide(None)
    assert chosen == "sim" and "CUDA_VISIBLE_DEVICES" in reason and driver == "12.8"


@pytest.mark.parametrize("driver,extra", [("12.2", "cuda12"), ("12.8", "cuda12"), ("13.0", "cuda13"), ("13.1", "cuda13")])
def test_install_command_follows_the_driver_major(driver: str, extra: str) -> None:
    assert f"pip install -c constraints.txt -e '.[{extra}]'" in mode.install_command(driver)


def test_install_command_for_an_old_driver_says_update() -> None:
    assert mode.install_command("11.8").startswith("update the NVIDIA driver")


def _probe(driver: str = "12.8") -> DriverProbe:
    g = GPUInfo(0, "NVIDIA H200", (9, 0), 140 << 30, 132, 50 << 20, 0x19, "GPU-x", "0000:19:00.0")
    return DriverProbe((g,), driver, None)


def test_cupy_ready_against_the_real_cupy_without_a_gpu() -> None:
    """The real, installed CuPy imports here but cannot run on a device: that is the reason, in words."""
    pytest.importorskip("cupy")
    why = mode.cupy_ready(_probe())
    assert why is not None and "could not run an operation on the GPU" in why and "CUDARuntimeError" in why
    assert "cudaErrorInsufficientDriver" in why and "update the driver" in why  # what that error means, said


def test_cupy_for_a_newer_cuda_than_the_driver_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    cupy = pytest.importorskip("cupy")
    monkeypatch.setattr(cupy.cuda.runtime, "runtimeGetVersion", lambda: 13000)
    why = mode.cupy_ready(_probe("12.8"))
    assert "built for CUDA 13.0, newer than the driver's CUDA 12.8" in why


def test_no_cupy_is_sim_with_the_install_command_and_forced_gpu_is_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    monkeypatch.setattr(mode, "probe_driver", lambda: _probe("13.0"))
    chosen, reason, gpus, _ = mode._decide(None)
    assert chosen == "sim" and gpus == ()
    assert "NVIDIA H200 found, but CuPy is not installed" in reason and "'.[cuda13]'" in reason
    with pytest.raises(ModeError) as err:
        mode._decide("gpu")
    assert "CuPy is not installed" in str(err.value) and "'.[cuda13]'" in err.value.fix


def test_gpu_mode_when_cupy_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mode, "probe_driver", lambda: _probe())
    monkeypatch.setattr(mode, "cupy_ready", lambda probe: None)
    chosen, reason, gpus, _ = mode._decide(None)
    assert chosen == "gpu" and "CuPy runs on it" in reason and gpus[0].name == "NVIDIA H200"


def test_mig_slice_is_named_and_its_peaks_scaled(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit import bench, hw

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4d7c2f4e-0000-0000-0000-000000000000")
    p = device.probe_driver(_FakeLibcuda(["NVIDIA H100 80GB HBM3 MIG 1g.10gb"]))
    g = p.gpus[0]
    assert g.mig and g.uuid.startswith("MIG-")
    text = mode.SETUP_STEPS.describe_slice(g)
    assert "MIG slice: 16 of 132 SMs" in text and "of the whole H100 SXM" in text and "scaled" in text
    e = mode.Environment("gpu", g.name, (9, 0), g.memory_bytes, g.sm_count, 1, "12.8", "test", (g,), mig=text)
    assert "MIG slice" in e.banner()
    monkeypatch.setattr(bench, "env", lambda: e)
    mem, fp16, source = bench.device_peaks("fp16")
    whole = hw.gpu("H100 SXM")
    assert fp16 == pytest.approx(whole.peak("fp16").value * 16 / 132)
    assert mem == pytest.approx(whole.memory_bandwidth.value * (10 << 30) / (whole.memory_size.value * 1e9))
    assert "scaled to this MIG slice" in source
    assert mode.SETUP_STEPS.describe_slice(GPUInfo(0, "NVIDIA H100 80GB HBM3", (9, 0), 80 << 30, 132, 1, 0)) is None
