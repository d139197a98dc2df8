"""deploy/k8s/values.yaml against a real KubeSpawner (jupyterhub-kubespawner from PyPI), no cluster: the values are
mapped onto KubeSpawner's traits as Zero to JupyterHub's hub configuration maps them (the subset the course uses),
the chart's extraConfig snippets run as the chart runs them, each profile is applied with KubeSpawner's own
``load_user_options`` and the pod manifest it builds is checked: image, command, resource limits (a MIG slice as
``nvidia.com/gpu`` or ``nvidia.com/mig-1g.18gb``, whole GPUs for instructors), node selector, environment, storage.
About 1 s."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

kubespawner = pytest.importorskip("kubespawner")

from traitlets.config import Config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VALUES = yaml.safe_load((ROOT / "deploy" / "k8s" / "values.yaml").read_text())


def chart_config(values: dict) -> Config:
    """The hub configuration Zero to JupyterHub builds from ``values`` (the keys the course sets), then extraConfig."""
    c = Config()
    su = values["singleuser"]
    c.KubeSpawner.image = f"{su['image']['name']}:{su['image']['tag']}"
    c.KubeSpawner.image_pull_policy = su["image"]["pullPolicy"]
    c.KubeSpawner.cmd = su["cmd"]
    c.KubeSpawner.uid = su["uid"]
    c.KubeSpawner.fs_gid = su["fsGid"]
    c.KubeSpawner.cpu_limit = float(su["cpu"]["limit"])
    c.KubeSpawner.cpu_guarantee = float(su["cpu"]["guarantee"])
    c.KubeSpawner.mem_limit = su["memory"]["limit"]
    c.KubeSpawner.mem_guarantee = su["memory"]["guarantee"]
    c.KubeSpawner.environment = dict(su["extraEnv"])
    c.KubeSpawner.start_timeout = su["startTimeout"]
    c.KubeSpawner.profile_list = su["profileList"]
    storage = su["storage"]
    assert storage["type"] == "dynamic"
    c.KubeSpawner.pvc_name_template = "claim-{user_server}"
    c.KubeSpawner.storage_capacity = storage["capacity"]
    c.KubeSpawner.volumes = [{"name": "home", "persistentVolumeClaim": {"claimName": "{pvc_name}"}}]
    c.KubeSpawner.volume_mounts = [{"name": "home", "mountPath": storage["homeMountPath"]}]
    for section, settings in values["hub"].get("config", {}).items():
        for key, value in settings.items():
            setattr(c[section], key, value)
    namespace = {"c": c}  # the chart runs every snippet in its hub configuration's one namespace
    for _, snippet in sorted(values["hub"]["extraConfig"].items()):
        exec(compile(snippet, "extraConfig", "exec"), namespace)
    return c


ADMIN_PASSWORD = "from-the-labkit-admin-secret"
SIGNUP_CODE = "from-the-labkit-signup-secret"


def hub_env(values: dict) -> dict[str, str]:
    """hub.extraEnv as the hub pod sees it (the admin password from its Secret: a stand-in value here)."""
    out = {}
    for key, value in values["hub"]["extraEnv"].items():
        if isinstance(value, dict):
            ref = value["valueFrom"]["secretKeyRef"]
            assert ref in ({"name": "labkit-admin", "key": "password"}, {"name": "labkit-signup", "key": "code"}), ref
            out[key] = ADMIN_PASSWORD if ref["name"] == "labkit-admin" else SIGNUP_CODE
        else:
            out[key] = str(value)
    return out


def user(name: str, groups: tuple[str, ...] = ()) -> SimpleNamespace:
    return SimpleNamespace(name=name, id=7, url=f"/user/{name}/", groups=[SimpleNamespace(name=g) for g in groups],
                           escaped_name=name, server=None, spawners={})


def in_loop(fn):
    """Run ``fn`` inside an event loop: KubeSpawner makes its (never used) API client when it is made."""

    async def run():
        return await fn()

    return asyncio.run(run())


def pod_for(config: Config, who: SimpleNamespace, profile: str | None):
    async def build():
        spawner = kubespawner.KubeSpawner(_mock=True, config=config, user=who)
        spawner.user_options = {"profile": profile} if profile else {}
        await spawner.load_user_options()
        return spawner, await spawner.get_pod_manifest()

    return in_loop(build)


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: none, user: {token: not-a-real-token}}]
contexts: [{name: none, context: {cluster: none, user: none, namespace: labkit}}]
current-context: none
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    """The chart's configuration; KubeSpawner loads a client configuration when it is made, so give it one that
    points at a loopback port nothing listens on (building a pod manifest sends no request)."""
    kubeconfig = tmp_path_factory.mktemp("kube") / "config"
    kubeconfig.write_text(KUBECONFIG)
    from concurrent.futures import ThreadPoolExecutor

    import kubernetes_asyncio.config

    def load_config(**kwargs) -> None:  # kubespawner.clients.load_config, with our file instead of ~/.kube/config
        with ThreadPoolExecutor(1) as pool:
            pool.submit(lambda: asyncio.run(kubernetes_asyncio.config.load_kube_config(config_file=str(kubeconfig)))).result()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kubespawner.spawner, "load_config", load_config)
        for key, value in hub_env(VALUES).items():
            mp.setenv(key, value)
        yield chart_config(VALUES)


def container(pod):
    (c,) = pod.spec.containers
    return c


def field(obj, attr: str, key: str):
    """A pod field, whether the manifest holds a client model or (as KubeSpawner does for some) a plain dict."""
    return obj.get(key, obj.get(attr)) if isinstance(obj, dict) else getattr(obj, attr)


def env_of(c) -> dict[str, str]:
    return {e.name: e.value for e in c.env if e.value is not None}


def test_learner_profile_asks_for_one_mig_slice(config: Config) -> None:
    spawner, pod = pod_for(config, user("alice"), "learner")
    c = container(pod)
    assert c.image == "registry.example.org/labkit-course:cuda12"
    assert c.args[0] == "/opt/course/deploy/singleuser.sh" or (c.command or [None])[0] == "/opt/course/deploy/singleuser.sh"
    assert c.resources.limits["nvidia.com/gpu"] == "1"
    assert not any(k.startswith("nvidia.com/mig-") for k in c.resources.limits)
    assert c.resources.limits["cpu"] == 4 and c.resources.limits["memory"] == 16 * 1024**3
    assert pod.spec.node_selector["nvidia.com/mig.config"] == "all-1g.18gb"
    env = env_of(c)
    # the service's in-cluster address: never through the proxy, whose HTTPS redirect would drop the posts
    assert env["LABKIT_PROGRESS_URL"] == "http://hub:10101/services/labkit-progress/"
    assert env["LABKIT_WORK_DIR"] == "/home/learner/labkit-work" and env["LABKIT_GPU_SHARE"] == "mig-1g.18gb"
    assert env["JUPYTERHUB_USER"] == "alice"
    assert field(pod.spec.security_context, "fs_group", "fsGroup") == 1000
    assert field(c.security_context, "run_as_user", "runAsUser") == 1000
    mounts = {m.mount_path for m in c.volume_mounts}
    assert "/home/learner" in mounts
    claims = [field(field(v, "persistent_volume_claim", "persistentVolumeClaim"), "claim_name", "claimName")
              for v in pod.spec.volumes if field(v, "persistent_volume_claim", "persistentVolumeClaim")]
    assert claims == ["claim-alice"]


def test_mixed_strategy_profile_asks_for_the_profile_by_name(config: Config) -> None:
    _, pod = pod_for(config, user("bob"), "learner-mixed")
    limits = container(pod).resources.limits
    assert limits["nvidia.com/mig-1g.18gb"] == "1" and "nvidia.com/gpu" not in limits


def test_default_profile_is_the_learners(config: Config) -> None:
    _, pod = pod_for(config, user("carol"), None)
    assert container(pod).resources.limits["nvidia.com/gpu"] == "1"
    assert pod.spec.node_selector["nvidia.com/mig.config"] == "all-1g.18gb"


@pytest.mark.parametrize("slug, gpus, memory", [("instructor", "1", 64), ("instructor-2gpu", "2", 128)])
def test_instructor_profiles_get_whole_gpus(config: Config, slug: str, gpus: str, memory: int) -> None:
    _, pod = pod_for(config, user("ivan", groups=("instructors",)), slug)
    c = container(pod)
    assert c.resources.limits["nvidia.com/gpu"] == gpus
    assert c.resources.limits["memory"] == memory * 1024**3
    assert pod.spec.node_selector["nvidia.com/mig.config"] == "all-disabled"
    assert env_of(c)["LABKIT_GPU_SHARE"] == "whole-gpu"


def test_learners_are_not_offered_the_instructor_profiles(config: Config) -> None:
    async def check():
        learner = kubespawner.KubeSpawner(_mock=True, config=config, user=user("alice"))
        assert [p["slug"] for p in config.KubeSpawner.profile_list(learner)] == ["learner", "learner-mixed"]
        teacher = kubespawner.KubeSpawner(_mock=True, config=config, user=user("ingrid"))
        assert "instructor" in [p["slug"] for p in config.KubeSpawner.profile_list(teacher)]
        learner.user_options = {"profile": "instructor"}
        with pytest.raises(ValueError):
            await learner.load_user_options()

    in_loop(check)


def test_hub_side_settings(config: Config) -> None:
    names = [s["name"] for s in config.JupyterHub.services]
    assert "labkit-progress" in names
    svc = config.JupyterHub.services[names.index("labkit-progress")]
    assert svc["url"] == "http://hub:10101" and svc["environment"]["LABKIT_PROGRESS_LISTEN"] == "0.0.0.0"
    assert "access:services!service=labkit-progress" in config.Spawner.server_token_scopes
    # every user may reach the service through the `user` role (JupyterHub 5, the chart's, has no extra_user_scopes)
    (user_role,) = [r for r in config.JupyterHub.load_roles if r["name"] == "user"]
    assert set(user_role["scopes"]) == {"self", "access:services!service=labkit-progress"}
    assert VALUES["cull"]["enabled"] is True and VALUES["cull"]["timeout"] > 0
    assert any(p["port"] == 10101 for p in VALUES["hub"]["service"]["extraPorts"])
    operator = yaml.safe_load((ROOT / "deploy" / "k8s" / "gpu-operator-values.yaml").read_text())
    assert operator["mig"]["strategy"] == "single"


def test_values_profiles_are_the_generated_ones_and_each_gpu_file_builds_its_pods(config: Config) -> None:
    """deploy/k8s/values.yaml's profiles are `labkit mig-plan --gpu H200 --k8s-profiles`; deploy/k8s/profiles/ holds
    the command's output for each GPU model, and each file's profiles build the pods their GPU needs."""
    from labkit import mig

    assert VALUES["singleuser"]["profileList"] == mig.k8s_profiles("H200")
    expected = {"h200": ("H200", "1g.18gb"), "h100": ("H100", "1g.10gb"), "a100-40gb": ("A100 40GB", "1g.5gb"),
                "a100-80gb": ("A100 80GB", "1g.10gb")}
    for stem, (gpu, slice_) in expected.items():
        path = ROOT / "deploy" / "k8s" / "profiles" / f"{stem}.yaml"
        assert path.read_text() == mig.k8s_profiles_yaml(gpu) + ("" if mig.k8s_profiles_yaml(gpu).endswith("\n") else "\n"), (
            f"{path.name} is stale: labkit mig-plan --gpu '{gpu}' --k8s-profiles > {path.relative_to(ROOT)}")
        overlay = yaml.safe_load(path.read_text())
        c = Config(config)
        c.KubeSpawner.profile_list = overlay["singleuser"]["profileList"]
        _, pod = pod_for(c, user("alice"), "learner")
        assert pod.spec.node_selector["nvidia.com/mig.config"] == f"all-{slice_}"
        assert container(pod).resources.limits["nvidia.com/gpu"] == "1"
        _, pod = pod_for(c, user("alice"), "learner-mixed")
        assert container(pod).resources.limits[f"nvidia.com/mig-{slice_}"] == "1"


def test_on_kubernetes_the_instructor_can_log_in_and_learners_sign_up(config: Config) -> None:
    """The chart's login settings made into the real authenticator (an in-memory hub database): the instructor's
    account exists, approved, from the Secret's password; a learner's sign-up waits for approval; nobody signs up
    under the instructor's name."""
    from jupyterhub import orm

    from labkit.hub_native import CourseNativeAuthenticator

    assert config.JupyterHub.authenticator_class == "labkit.hub_native.CourseNativeAuthenticator"
    assert config.Authenticator.admin_users == set()  # nobody is a hub admin; ingrid holds the teaching role
    assert "ingrid" in {n for r in config.JupyterHub.load_roles if r["name"] == "teaching" for n in r["users"]}
    assert config.CourseNativeAuthenticator.signup_code == SIGNUP_CODE
    auth = CourseNativeAuthenticator(config=config, _deprecated_db_session=orm.new_session_factory("sqlite://")(),
                                    bcrypt_rounds=4)  # bcrypt's least cost: no step here measures time
    assert asyncio.run(auth.authenticate(None, {"username": "ingrid", "password": ADMIN_PASSWORD})) == "ingrid"
    assert asyncio.run(auth.authenticate(None, {"username": "ingrid", "password": "a-guess-at-it"})) is None
    assert auth.create_user("ingrid", "mallory-wants-admin") is None
    assert auth.create_user("alice", "alice-learns-cuda").is_authorized is False
    assert asyncio.run(auth.authenticate(None, {"username": "alice", "password": "alice-learns-cuda"})) is None


def test_learner_pods_are_restricted(config: Config) -> None:
    """Red team 3, #15: the learner pod had no runAsNonRoot, capability drop, seccomp or disk limit. Now each
    profile's pod has them all (labkit.hub_setup.harden_kubespawner from the values' extraConfig), and no
    privileged or root container; the namespace can enforce Pod Security "restricted"."""
    for slug in ("learner", "learner-mixed", "instructor", "instructor-2gpu"):
        who = user("ingrid") if slug.startswith("instructor") else user("alice")
        _, pod = pod_for(config, who, slug)
        c = container(pod)
        psc, csc = pod.spec.security_context, c.security_context
        assert field(psc, "run_as_non_root", "runAsNonRoot") is True, slug
        assert field(field(psc, "seccomp_profile", "seccompProfile"), "type", "type") == "RuntimeDefault", slug
        assert field(csc, "run_as_non_root", "runAsNonRoot") is True and field(csc, "run_as_user", "runAsUser") == 1000
        assert field(csc, "allow_privilege_escalation", "allowPrivilegeEscalation") is False
        assert field(field(csc, "capabilities", "capabilities"), "drop", "drop") == ["ALL"], slug
        assert not field(csc, "privileged", "privileged")
        assert c.resources.limits["ephemeral-storage"] == "20Gi", slug
        assert not (pod.spec.init_containers or []), slug
    # the chart's own privileged init container (iptables for the metadata address) is switched off
    assert VALUES["singleuser"]["cloudMetadata"]["blockWithIptables"] is False


def test_the_hub_believes_x_forwarded_for_only_from_the_proxy_pods(config: Config) -> None:
    """R4-4: the values trusted X-Forwarded-For from every private address, learner pods included, so a learner's
    pod chose the address each of its login attempts counted under. Now only the chart's proxy pods (looked up by
    their labels) are believed: a learner pod's request carrying ``X-Forwarded-For: 203.0.113.77`` counts under the
    pod's own address; the proxy's (and autohttps in front of it) names the browser."""
    from jupyterhub import orm

    from labkit.hub_native import CourseNativeAuthenticator, client_address

    auth = CourseNativeAuthenticator(config=config, _deprecated_db_session=orm.new_session_factory("sqlite://")(),
                                    bcrypt_rounds=4)  # bcrypt's least cost: no step here measures time
    assert auth.trusted_proxies == [] and "proxy" in auth.trusted_proxy_selector
    asked = []

    async def pods():
        asked.append(auth.trusted_proxy_selector)
        return ["10.42.0.5", "10.42.1.9"]  # the proxy pod and the autohttps pod, as the cluster's API lists them

    auth.proxy_pod_addresses = pods
    trusted = asyncio.run(auth.refresh_trusted())
    assert asked and set(trusted) == {"10.42.0.5", "10.42.1.9"}

    def request(peer: str, xff: str):
        return SimpleNamespace(request=SimpleNamespace(remote_ip=peer, connection=SimpleNamespace(context=None),
                                                       headers={"X-Forwarded-For": xff}))

    assert client_address(request("10.42.3.7", "203.0.113.77"), trusted) == "10.42.3.7"  # a learner's pod
    assert client_address(request("10.42.0.5", "203.0.113.77"), trusted) == "203.0.113.77"  # the proxy
    # browser -> autohttps -> proxy -> hub: the proxy appends autohttps' address, which is skipped
    assert client_address(request("10.42.0.5", "198.51.100.4, 10.42.1.9"), trusted) == "198.51.100.4"
    # a client's own entries further left are never believed
    assert client_address(request("10.42.0.5", "127.0.0.1, 198.51.100.4, 10.42.1.9"), trusted) == "198.51.100.4"
    # the lockout replay: 5 wrong passwords for ingrid from a pod, each with another X-Forwarded-For, then the right
    # one from the same pod: refused (the failures all count under the pod's address)
    for i in range(5):
        handler = request("10.42.3.7", f"203.0.113.{i}")
        assert asyncio.run(auth.authenticate(handler, {"username": "ingrid", "password": f"guess-{i}-abcdef"})) is None
    handler = request("10.42.3.7", "203.0.113.99")
    assert asyncio.run(auth.authenticate(handler, {"username": "ingrid", "password": ADMIN_PASSWORD})) is None
    assert asyncio.run(auth.authenticate(request("10.42.0.5", "198.51.100.4"), {"username": "ingrid", "password": ADMIN_PASSWORD})) == "ingrid"


def test_learners_home_volume_has_a_size(config: Config) -> None:
    """R4-8 on Kubernetes: each learner's home is a PersistentVolumeClaim of a fixed size (10Gi), not the node's disk."""
    assert VALUES["singleuser"]["storage"]["type"] == "dynamic" and VALUES["singleuser"]["storage"]["capacity"] == "10Gi"
    assert VALUES["singleuser"]["storage"]["homeMountPath"] == "/home/learner"
