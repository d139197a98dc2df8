"""JupyterLab's GPU dashboards (jupyterlab-nvdashboard): declared with the GPU extras, pinned, in the course image's
install steps and in the learners' setup page; and, where installed (``make test`` installs ``.[cuda12]``), imported
without a GPU and listed by JupyterLab as a prebuilt extension with its server part enabled. Under 3 s."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = "jupyterlab-nvdashboard==0.15.0"


def test_declared_with_the_gpu_extras_and_pinned() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert PIN in extras["cuda12"] and PIN in extras["cuda13"]
    assert not any("nvdashboard" in r for r in extras["dev"] + extras["hub"])  # sim-only installs stay without it
    assert re.search(r"^jupyterlab-nvdashboard==0\.15\.0$", (ROOT / "constraints.txt").read_text(), re.M)
    assert PIN in (ROOT / "environment.yml").read_text()
    install = (ROOT / "deploy" / "install.sh").read_text()
    gpu_block = install[install.index('if [ "$cuda" != none ]'):]
    assert "import importlib.metadata as m, jupyterlab_nvdashboard" in gpu_block.split("fi\n")[0]
    setup = (ROOT / "course" / "setup-learners.md").read_text()
    for words in ("GPU Dashboards", "NVLink Throughput", "PCIe Throughput", "GPU Utilization", "Labs 05 to 08", "`sim` mode"):
        assert words in setup, words


def test_jupyterlab_lists_it_without_a_gpu() -> None:
    pytest.importorskip("jupyterlab_nvdashboard")  # imports with no GPU: NVML absent means no GPUs, not an error
    from importlib import metadata

    from jupyter_core.paths import jupyter_config_path, jupyter_path
    from jupyter_server.extension.config import ExtensionConfigManager
    from jupyterlab_server.config import get_federated_extensions

    assert metadata.version("jupyterlab-nvdashboard") == "0.15.0"
    ext = get_federated_extensions(jupyter_path("labextensions"))  # what JupyterLab's page loads
    assert ext["jupyterlab-nvdashboard"]["version"] == "0.15.0"
    enabled = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()
    assert enabled.get("jupyterlab_nvdashboard") is True  # its server part, which streams NVML's readings
