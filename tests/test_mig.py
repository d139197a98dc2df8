"""labkit.mig (mig-plan) and the DGX hub's MIG-slice allocator and DockerSpawner configuration. Under a second."""

from __future__ import annotations

import asyncio

import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from labkit import cli, mig
from labkit.errors import LabkitError

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy" / "jupyterhub"


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


alloc = load_module("mig_allocator", DEPLOY / "mig_allocator.py")


# ---------------------------------------------------------------------------------------------- profiles and plans


def test_profiles_from_the_gpu_operator_config() -> None:
    h200 = mig.profile("H200")
    assert (h200.name, h200.per_gpu.value, h200.memory.value, h200.compute_slices) == ("1g.18gb", 7, 18, 1)
    assert "GPU Operator" in h200.per_gpu.source
    assert mig.profile("H100").name == "1g.10gb" and mig.profile("H100").per_gpu.value == 7
    assert mig.profile("H200", "3g.71gb").per_gpu.value == 2
    assert mig.max_instances("H200").value == 7 and "Multi-Instance GPU user guide" in mig.max_instances("H200").source
    assert h200.node_label == "all-1g.18gb" and h200.resource_mixed == "nvidia.com/mig-1g.18gb"
    for gpu in mig.gpus():  # a uniform layout never exceeds the GPU's instances, nor its memory
        for p in mig.profiles(gpu):
            assert p.per_gpu.value * p.compute_slices <= 7
            assert p.per_gpu.value * p.memory.value <= mig.hw.gpu(gpu).memory_size.value * 1.05


def test_plan_for_40_and_56_learners() -> None:
    p = mig.plan("H200", 40)
    assert (p.profile, p.slices_per_gpu, p.learner_gpus, p.dgx_systems, p.spare_slices) == ("1g.18gb", 7, 6, 1, 2)
    assert p.gpu_memory_gb == 141 and p.node_label == {"nvidia.com/mig.config": "all-1g.18gb"}
    p = mig.plan("H200", 56)
    assert (p.learner_gpus, p.dgx_systems, p.dgx_systems_mixed, p.spare_slices) == (8, 1, 1, 0)
    p = mig.plan("H200", 56, instructor_gpus=1)
    assert (p.gpus, p.dgx_systems, p.dgx_systems_mixed) == (9, 2, 2)
    p = mig.plan("H100", 100)
    assert (p.profile, p.learner_gpus, p.dgx_systems) == ("1g.10gb", 15, 2)
    assert p.resource_mixed == {"nvidia.com/mig-1g.10gb": 1} and p.resource_single == {"nvidia.com/gpu": 1}


@pytest.mark.parametrize(
    "learners, instructor_gpus, single, mixed",
    [
        (40, 1, 2, 1),  # 6 learner GPUs: the whole GPU needs a node of its own when every GPU of a node is cut alike
        (40, 2, 2, 1),
        (49, 1, 2, 1),  # 7 learner GPUs + 1 whole: one node under mixed, exactly full
        (56, 0, 1, 1),
        (56, 8, 2, 2),
        (57, 1, 3, 2),  # 9 learner GPUs: two learner nodes, and one for the instructor
    ],
)
def test_node_counts_with_instructor_gpus_under_both_strategies(learners, instructor_gpus, single, mixed) -> None:
    p = mig.plan("H200", learners, instructor_gpus=instructor_gpus)
    assert (p.dgx_systems, p.dgx_systems_mixed) == (single, mixed)
    assert p.instructor_node_label == {"nvidia.com/mig.config": "all-disabled"}


def test_complete_mig_tables() -> None:
    """Every uniform profile of NVIDIA's MIG user guide (Supported MIG Profiles), per GPU model."""
    tables = {
        "A100 40GB": {"1g.5gb": 7, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
        "A100 80GB": {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
        "H100": {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
        "H200": {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1},
        "B200": {"1g.23gb": 7, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1, "7g.180gb": 1},
    }
    for gpu, table in tables.items():
        assert {p.name: int(p.per_gpu.value) for p in mig.profiles(gpu)} == table, gpu
        assert all("user guide" in p.per_gpu.source for p in mig.profiles(gpu)), gpu


def test_b300_profiles_come_from_the_gpu_operator_and_say_so() -> None:
    """The MIG user guide (v580) has no B300 table: the figures are the GPU Operator's, and flagged unconfirmed."""
    assert {p.name: int(p.per_gpu.value) for p in mig.profiles("B300")} == {
        "1g.34gb": 7,
        "1g.67gb": 4,
        "2g.67gb": 3,
        "3g.135gb": 2,
        "4g.135gb": 1,
        "7g.269gb": 1,
    }
    src = mig.profile("B300").per_gpu.source
    assert "GPU Operator" in src and "no B300 table" in src and "Unconfirmed" in src


def test_mig_plan_for_a_dgx_b200_class(capsys) -> None:
    """`labkit mig-plan --gpu B200` plans a class: seven 1g.23gb slices per B200, 56 per DGX B200."""
    pl = mig.plan("B200", 56)
    assert (pl.profile, pl.slices_per_gpu, pl.gpus, pl.dgx_systems) == ("1g.23gb", 7, 8, 1)
    assert pl.node_label == {"nvidia.com/mig.config": "all-1g.23gb"}
    assert all(row["works"] for row in pl.labs)
    assert cli.main(["mig-plan", "--gpu", "B200", "--learners", "40"]) == 0
    assert "all-1g.23gb" in capsys.readouterr().out


def test_a100_alone_asks_which_memory_size(capsys) -> None:
    with pytest.raises(LabkitError, match="two memory sizes") as info:
        mig.plan("A100", 10)
    assert "A100 40GB" in info.value.fix and "A100 80GB" in info.value.fix
    assert cli.main(["mig-plan", "--gpu", "A100", "--learners", "10"]) == 2
    assert "A100 80GB" in capsys.readouterr().err
    assert mig.plan("A100 80GB", 10).profile == "1g.10gb" and mig.plan("A100 40GB", 10).profile == "1g.5gb"


def test_json_fields_are_typed(capsys) -> None:
    assert cli.main(["mig-plan", "--gpu", "H100", "--learners", "40", "--instructor-gpus", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["resource_single"] == {"nvidia.com/gpu": 1} and doc["resource_mixed"] == {"nvidia.com/mig-1g.10gb": 1}
    assert doc["node_label"] == {"nvidia.com/mig.config": "all-1g.10gb"}
    assert isinstance(doc["dgx_systems"], int) and (doc["dgx_systems"], doc["dgx_systems_mixed"]) == (2, 1)
    assert not any(isinstance(v, str) and ": " in v and k.startswith("resource") for k, v in doc.items())


def test_k8s_profiles_command(capsys) -> None:
    import yaml

    assert cli.main(["mig-plan", "--gpu", "H100", "--k8s-profiles"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    slugs = [p["slug"] for p in doc["singleuser"]["profileList"]]
    assert slugs == ["learner", "learner-mixed", "instructor", "instructor-2gpu"]
    learner = doc["singleuser"]["profileList"][0]["kubespawner_override"]
    assert learner["node_selector"] == {"nvidia.com/mig.config": "all-1g.10gb"}
    assert cli.main(["mig-plan", "--gpu", "H200"]) == 2 and "--learners" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--learners", "40"], ["--learners", "40", "--json"], ["--k8s-profiles"]])
def test_a_closed_pipe_ends_quietly(args) -> None:
    """`labkit mig-plan ... | head -1`: no BrokenPipeError traceback. The reader here has closed its end before
    labkit writes a byte, so every write meets a closed pipe (with `head` that depends on timing)."""
    import os
    import subprocess

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "labkit.cli", "mig-plan", "--gpu", "H200", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_plan_refuses_bad_counts(bad) -> None:
    with pytest.raises(LabkitError):
        mig.plan("H200", bad)


def test_unknown_gpu_and_profile() -> None:
    with pytest.raises(LabkitError, match="no MIG profiles"):
        mig.plan("V100", 10)
    with pytest.raises(LabkitError, match="1g.18gb"):
        mig.profile("H200", "1g.10gb")


def test_every_lab_fits_a_1g_slice_and_says_what_it_skips() -> None:
    assert all(r["works"] for r in mig.labs_on(mig.profile("A100 40GB")))  # the smallest slice of all (5 GB)
    rows = {r["lab"]: r for r in mig.labs_on(mig.profile("H100"))}
    assert set(rows) == {f"{i:02d}" for i in range(10)}
    assert all(r["works"] for r in rows.values())
    assert any("peer" in s for s in rows["07"]["skips"]) and any("NCCL" in s for s in rows["08"]["skips"])
    assert all(r["label"].startswith("computed") for r in rows.values())


def test_lab_sizes_match_the_notebooks() -> None:
    """The computed memory figures rest on the gpu-mode sizes the notebooks use: keep them in step."""
    for lab in mig.LABS:
        (src,) = (ROOT / "notebooks" / "src").glob(f"{lab.lab}-*.py")
        text = src.read_text()
        for literal in lab.source:
            assert literal in text, f"lab {lab.lab}: {literal!r} is no longer in {src.name}; update labkit.mig.LABS"
    from labkit import bandwidth

    assert max(bandwidth.SWEEP_SIZES) == 2**30  # lab 07's estimate counts the sweep's largest buffer


def test_cli_text_and_json(capsys) -> None:
    assert cli.main(["mig-plan", "--gpu", "H200", "--learners", "40"]) == 0
    out = capsys.readouterr().out
    assert "1g.18gb" in out and "6 for learners" in out and "computed from the problem sizes" in out
    assert cli.main(["mig-plan", "--gpu", "H100", "--learners", "56", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["profile"] == "1g.10gb" and doc["learner_gpus"] == 8 and len(doc["labs"]) == 10
    assert cli.main(["mig-plan", "--gpu", "P100", "--learners", "3"]) == 2


# ---------------------------------------------------------------------------------------------- the allocator

SMI = """GPU 0: NVIDIA H200 (UUID: GPU-11111111-2222-3333-4444-555555555555)
  MIG 1g.18gb     Device  0: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000001)
  MIG 1g.18gb     Device  1: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000002)
GPU 1: NVIDIA H200 (UUID: GPU-66666666-2222-3333-4444-555555555555)
  MIG 1g.18gb     Device  0: (UUID: MIG-bbbbbbbb-0000-5000-8000-000000000001)
GPU 7: NVIDIA H200 (UUID: GPU-77777777-2222-3333-4444-555555555555)
"""


def test_parse_nvidia_smi_l() -> None:
    slices, gpus = alloc.parse_nvidia_smi_l(SMI)
    assert [(s.gpu, s.profile) for s in slices] == [(0, "1g.18gb"), (0, "1g.18gb"), (1, "1g.18gb")]
    assert slices[2].uuid == "MIG-bbbbbbbb-0000-5000-8000-000000000001"
    assert [g[0] for g in gpus] == [0, 1, 7]


def test_discover_prefers_the_listed_slices_then_nvidia_smi(monkeypatch) -> None:
    assert [s.uuid for s in alloc.discover({"LABKIT_MIG_SLICES": "MIG-x, MIG-y"})] == ["MIG-x", "MIG-y"]
    monkeypatch.setattr(alloc, "slices_from_nvml", lambda: [])
    fake_run = lambda *a, **k: SimpleNamespace(stdout=SMI)  # noqa: E731
    assert len(alloc.discover({}, run=fake_run)) == 3


def test_one_slice_per_user_never_twice_freed_on_stop(tmp_path: Path) -> None:
    slices = alloc.parse_nvidia_smi_l(SMI)[0]
    a = alloc.SliceAllocator(slices, state_file=tmp_path / "state.json")
    s1, s2, s3 = (a.assign(u) for u in ("alice", "bob", "carol"))
    assert len({s1, s2, s3}) == 3
    assert a.assign("alice") == s1  # kept per user
    with pytest.raises(alloc.NoSliceLeft):
        a.assign("dave")
    assert a.release("bob") == s2
    assert a.assign("dave") == s2  # the freed slice, and only that one
    # a restarted hub reads who holds what
    b = alloc.SliceAllocator(slices, state_file=tmp_path / "state.json")
    assert b.held() == {"alice": s1, "carol": s3, "dave": s2}
    b.release("alice")
    b.release("carol")
    assert b.assign("alice") == s1  # her old slice, free again, goes back to her
    assert b.assign("bob") == s3  # bob's old one (s2) is dave's: he gets the one left
    with pytest.raises(ValueError):
        alloc.SliceAllocator(["MIG-1", "MIG-1"])
    with pytest.raises(alloc.NoSliceLeft, match="no MIG slices were found"):
        alloc.SliceAllocator([]).assign("alice")


# ---------------------------------------------------------------------------------------------- the DGX hub config


def test_dockerspawner_config_gives_each_learner_a_slice(tmp_path: Path, monkeypatch) -> None:
    from traitlets.config import Config

    c = Config()
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("LABKIT_MIG_SLICES", "MIG-a,MIG-b")
    monkeypatch.setenv("LABKIT_INSTRUCTORS", "ingrid")
    monkeypatch.setenv("LABKIT_INSTRUCTOR_GPUS", "7")
    monkeypatch.setenv("LABKIT_ADMIN_PASSWORD", "instructor-password-1234")
    monkeypatch.setenv("LABKIT_HUB_HOSTNAME", "dgx.example.org")
    monkeypatch.delenv("LABKIT_LOGIN", raising=False)
    monkeypatch.delenv("LABKIT_TLS", raising=False)
    monkeypatch.setenv("LABKIT_HOME_SIZE", "off")  # the size-limited home: tests/test_redteam_deploy.py
    docker = pytest.importorskip("docker")
    network = SimpleNamespace(attrs={"Options": {"com.docker.network.bridge.enable_icc": "false"}})
    monkeypatch.setattr(docker, "from_env", lambda: SimpleNamespace(networks=SimpleNamespace(get=lambda name: network)))
    source = (DEPLOY / "jupyterhub_config.py").read_text()
    umask = os.umask(0o022)  # the config sets the hub's umask (0077): give this test process its own back
    try:
        exec(
            compile(source, str(DEPLOY / "jupyterhub_config.py"), "exec"),
            {"get_config": lambda: c, "__file__": str(DEPLOY / "jupyterhub_config.py")},
        )
    finally:
        os.umask(umask)
    assert c.JupyterHub.spawner_class == "docker" and c.DockerSpawner.cmd == ["/opt/course/deploy/singleuser.sh"]
    assert c.DockerSpawner.mounts == [{"type": "volume", "source": "labkit-home-{username}", "target": "/home/learner"}]
    assert "labkit-progress" in [s["name"] for s in c.JupyterHub.services]
    assert (
        c.Spawner.environment["LABKIT_PROGRESS_URL"] == "http://172.17.0.1:10101/services/labkit-progress/"
    )  # not via the proxy
    # own logins, HTTPS with a self-signed certificate made for the host, the culler
    assert c.JupyterHub.authenticator_class == "labkit.hub_native.CourseNativeAuthenticator"
    assert c.Authenticator.admin_users == set() and c.NativeAuthenticator.open_signup is False  # nobody is a hub admin
    assert c.JupyterHub.bind_url.startswith("https://") and Path(c.JupyterHub.ssl_cert).parent == tmp_path / "tls"
    assert "idle-culler" in [s["name"] for s in c.JupyterHub.services]

    # real DockerSpawner objects made from this config (no Docker daemon is asked anything): traitlets copies config
    # values into each spawner, so this also shows that every spawner shares the one allocator
    dockerspawner = pytest.importorskip("dockerspawner")

    def spawner(name, groups=()):
        user = SimpleNamespace(
            name=name,
            groups=[SimpleNamespace(name=g) for g in groups],
            id=1,
            url=f"/user/{name}/",
            escaped_name=name,
            server=None,
            spawners={},
        )
        return dockerspawner.DockerSpawner(config=c, user=user)

    def devices(sp):
        return sp._render_templates(sp._eval_if_callable(sp.extra_host_config))["device_requests"][0]["device_ids"]

    alice, bob = spawner("alice"), spawner("bob")
    assert alice.image == "labkit-course:cuda12" and alice.network_name == "labkit" and alice.remove
    assert alice.mem_limit == 16 * 1024**3 and alice.cpu_limit == 4
    assert alice.environment["LABKIT_PROGRESS_URL"].endswith("/services/labkit-progress/")
    got = {"alice": devices(alice), "bob": devices(bob)}
    assert sorted(d[0] for d in got.values()) == ["MIG-a", "MIG-b"]
    assert devices(spawner("ingrid")) == ["7"]  # an instructor: a whole GPU
    assert devices(spawner("ivan", groups=("instructors",))) == ["7"]
    with pytest.raises(Exception, match="in use"):
        devices(spawner("carol"))

    async def status(value):
        if isinstance(value, Exception):
            raise value
        return value

    # a stop that failed: the hook runs all the same, and the slice stays while the container may still run
    for still_there in (None, RuntimeError("Docker daemon did not answer")):
        alice.poll = lambda v=still_there: status(v)
        asyncio.run(alice.post_stop_hook(alice))
        with pytest.raises(Exception, match="in use"):
            devices(spawner("carol"))
    alice.poll = lambda: status(0)  # the container is gone: its slice goes to the next learner
    asyncio.run(alice.post_stop_hook(alice))
    carol = spawner("carol")
    assert devices(carol) == got["alice"]
    # docker-py accepts the request as DockerSpawner passes it (building a HostConfig needs no daemon)
    docker_types = pytest.importorskip("docker.types")
    hc = docker_types.HostConfig(
        version="1.43", device_requests=[dict(r) for r in carol._eval_if_callable(carol.extra_host_config)["device_requests"]]
    )
    assert hc["DeviceRequests"][0]["DeviceIDs"] == got["alice"] and hc["DeviceRequests"][0]["Capabilities"] == [["gpu"]]


def test_classroom_table_matches_labkit_mig() -> None:
    """course/classroom.md's lab-by-lab table says what labkit.mig computes."""
    text = (ROOT / "course" / "classroom.md").read_text()
    for row in mig.labs_on(mig.profile("H100")):
        m = re.search(rf"^\| {row['lab']} \| (\w+) \| ([\d.]+) \|", text, re.M)
        assert m, f"lab {row['lab']} is missing from classroom.md's table"
        assert m.group(1) == ("works" if row["works"] else "does not fit")
        assert float(m.group(2)) == pytest.approx(row["gpu_memory_gb"], abs=0.005)


def test_slices_from_nvml_with_a_stand_in(monkeypatch) -> None:
    """The NVML path, against a stand-in with the names of the real pynvml (checked below): GPU 0 in MIG mode with
    two slices, GPU 1 whole."""
    import pynvml as real

    names = [
        "nvmlInit",
        "nvmlShutdown",
        "nvmlDeviceGetCount",
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetMaxMigDeviceCount",
        "nvmlDeviceGetMigDeviceHandleByIndex",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetName",
        "NVML_DEVICE_MIG_ENABLE",
        "NVMLError",
    ]
    assert all(hasattr(real, n) for n in names)

    class NVMLError(Exception):
        pass

    migs = {0: ["MIG-0a", "MIG-0b", None]}
    fake = SimpleNamespace(
        NVMLError=NVMLError,
        NVML_DEVICE_MIG_ENABLE=1,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetMigMode=lambda g: (1, 1) if g == 0 else (0, 0),
        nvmlDeviceGetMaxMigDeviceCount=lambda g: 3,
        nvmlDeviceGetUUID=lambda h: h,
        nvmlDeviceGetName=lambda h: "NVIDIA H200 MIG 1g.18gb",
    )

    def handle(g, j):
        uuid = migs[g][j]
        if uuid is None:
            raise NVMLError("no MIG device at this index")
        return uuid

    fake.nvmlDeviceGetMigDeviceHandleByIndex = handle
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    found = alloc.slices_from_nvml()
    assert [(s.gpu, s.profile, s.uuid) for s in found] == [(0, "1g.18gb", "MIG-0a"), (0, "1g.18gb", "MIG-0b")]


# ---------------------------------------------------------------------------------------------- waiting, stops, damage


def test_a_start_racing_a_stop_waits_in_line_for_the_slice() -> None:
    import asyncio

    a = alloc.SliceAllocator(["MIG-1", "MIG-2"])
    a.assign("alice"), a.assign("bob")
    heard: list[str] = []

    async def scene():
        carol = asyncio.create_task(a.acquire("carol", wait_s=5, every_s=0.01, say=heard.append))
        dave = asyncio.create_task(a.acquire("dave", wait_s=5, every_s=0.01, say=heard.append))
        await asyncio.sleep(0.05)
        assert a.waiting() == ["carol", "dave"] and not carol.done()
        with pytest.raises(alloc.NoSliceLeft):
            a.assign("erin")  # no jumping the line
        a.release("bob")  # bob's stop finishes
        got = await carol
        await asyncio.sleep(0.05)
        assert not dave.done()
        a.release("alice")
        return got, await dave

    carol, dave = asyncio.run(scene())
    assert (carol, dave) == ("MIG-2", "MIG-1") and a.waiting() == []
    assert any("number 1 in line" in h for h in heard) and any("number 2 in line" in h for h in heard)
    with pytest.raises(alloc.NoSliceLeft, match=r"all 2 MIG slices are in use; you were number 1 in line"):
        asyncio.run(a.acquire("erin", wait_s=0.05, every_s=0.01))
    assert a.waiting() == []


def test_a_damaged_state_file_never_frees_a_slice_in_use(tmp_path: Path) -> None:
    state = tmp_path / "mig-slices.json"
    slices = ["MIG-1", "MIG-2", "MIG-3"]
    a = alloc.SliceAllocator(slices, state_file=state)
    a.assign("alice"), a.assign("bob")
    for damage in ("{not json", '{"held": ["MIG-1"]}', "[]"):
        state.write_text(damage)
        with pytest.raises(alloc.AllocatorStateError, match="damaged.*docker ps"):
            alloc.SliceAllocator(slices, state_file=state)
        assert state.read_text() == damage  # left as it was, for the admin

    class Container:
        def __init__(self, name, dev):
            self.name, self.attrs = name, {"HostConfig": {"DeviceRequests": [{"Driver": "nvidia", "DeviceIDs": [dev]}]}}

    client = SimpleNamespace(
        containers=SimpleNamespace(
            list=lambda: [Container("jupyter-alice", "MIG-1"), Container("jupyter-bob", "MIG-2"), Container("other", "GPU-7")]
        )
    )
    known = [alloc.Slice(-1, "listed", u) for u in slices]
    b = alloc.SliceAllocator(known, state_file=state, rebuild=lambda: alloc.held_by_containers(client, known))
    assert sorted(b.held().values()) == ["MIG-1", "MIG-2"] and list(tmp_path.glob("mig-slices.json.damaged-*"))
    assert b.assign("carol") == "MIG-3"  # never a slice a container holds
    assert b.assign("alice", container="jupyter-alice") == "MIG-1"  # alice's own, back under her name
    b.release("bob", container="jupyter-bob")
    assert b.assign("dave") == "MIG-2"
    with pytest.raises(alloc.AllocatorStateError, match="could not be read from the running containers"):
        state.write_text("{")
        alloc.SliceAllocator(slices, state_file=state, rebuild=lambda: (_ for _ in ()).throw(OSError("no docker daemon")))
