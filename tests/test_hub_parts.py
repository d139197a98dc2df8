"""The hub's parts that need no running hub (labkit.hub_setup): every login the course documents loads into its real
authenticator class with the settings it needs (and refuses to start without them), the self-signed certificate,
TLS and culler settings, and nbgitpuller bringing a new course version into a learner's copy without touching their
edits. About 2 s."""

from __future__ import annotations

import asyncio
import os
import subprocess
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest.importorskip("jupyterhub")

from traitlets.config import Config  # noqa: E402

from labkit import hub_setup  # noqa: E402

ENV = {
    "native": {"LABKIT_ADMIN_PASSWORD": "ingrid-teaches-gpus"},
    "github": {"LABKIT_GITHUB_ORG": "my-school:gpu-2026", "OAUTH_CLIENT_ID": "id", "OAUTH_CLIENT_SECRET": "secret",
               "OAUTH_CALLBACK_URL": "https://hub.example.org/hub/oauth_callback"},
    "google": {"LABKIT_GOOGLE_DOMAIN": "school.edu", "OAUTH_CLIENT_ID": "id", "OAUTH_CLIENT_SECRET": "secret",
               "OAUTH_CALLBACK_URL": "https://hub.example.org/hub/oauth_callback"},
    "oidc": {"LABKIT_OIDC_AUTHORIZE_URL": "https://id.school.edu/auth", "LABKIT_OIDC_TOKEN_URL": "https://id.school.edu/token",
             "LABKIT_OIDC_USERDATA_URL": "https://id.school.edu/userinfo", "LABKIT_OIDC_GROUP": "gpu-course",
             "OAUTH_CLIENT_ID": "id", "OAUTH_CLIENT_SECRET": "secret",
             "OAUTH_CALLBACK_URL": "https://hub.example.org/hub/oauth_callback"},
    "lti13": {"LABKIT_LTI_ISSUER": "https://moodle.school.edu", "LABKIT_LTI_AUTHORIZE_URL": "https://moodle.school.edu/mod/lti/auth.php",
              "LABKIT_LTI_JWKS_URL": "https://moodle.school.edu/mod/lti/certs.php", "LABKIT_LTI_CLIENT_ID": "abc123"},
}


def authenticator_class(name: str):
    """The class JupyterHub loads for ``authenticator_class`` (an entry point name or a dotted path)."""
    for ep in entry_points(group="jupyterhub.authenticators"):
        if ep.name == name:
            return ep.load()
    module, _, cls = name.rpartition(".")
    return getattr(__import__(module, fromlist=[cls]), cls)


@pytest.mark.parametrize("login", hub_setup.LOGINS)
def test_every_documented_login_loads_into_its_authenticator(login: str, monkeypatch: pytest.MonkeyPatch) -> None:
    c = Config()
    for key, value in ENV[login].items():  # OAuthenticator reads OAUTH_* from the environment itself
        monkeypatch.setenv(key, value)
    name = hub_setup.configure_login(c, login=login, instructors=["ingrid"], env=ENV[login])
    cls = authenticator_class(c.JupyterHub.authenticator_class)
    assert cls.__name__ == name
    kwargs = {}
    if login == "native":
        from jupyterhub import orm

        kwargs["_deprecated_db_session"] = orm.new_session_factory("sqlite://")()
    auth = cls(config=c, **kwargs)  # traitlets validates every setting here
    assert auth.admin_users == set()  # instructors hold the teaching role; nobody is a hub admin
    teaching = [r for r in c.JupyterHub.load_roles if r["name"] == "teaching"]
    assert teaching and teaching[0]["users"] == ["ingrid"] and not any(s.startswith("access:servers") for s in teaching[0]["scopes"])
    from labkit.progress_service import configure_hub

    configure_hub(c, public_url="https://hub.example.org", instructors=["ingrid"])
    # the hub refuses to start when an authenticator manages groups and the configuration loads some
    assert not (auth.manage_groups and dict.get(c.JupyterHub, "load_groups")), "the hub would not start"
    if login == "native":
        assert auth.open_signup is False and auth.minimum_password_length >= 10
        assert asyncio.run(auth.authenticate(None, {"username": "ingrid", "password": "ingrid-teaches-gpus"})) == "ingrid"
    elif login == "github":
        assert auth.allowed_organizations == {"my-school:gpu-2026"} and auth.client_id == "id"
    elif login == "google":
        assert auth.hosted_domain == ["school.edu"] and auth.allow_all
    elif login == "oidc":
        assert auth.allowed_groups == {"gpu-course"} and auth.admin_groups == set()
        with pytest.raises(hub_setup.HubSetupError, match="LABKIT_OIDC_ADMIN_GROUP is no longer used"):
            hub_setup.configure_login(Config(), login="oidc", instructors=["ingrid"],
                                      env={**ENV["oidc"], "LABKIT_OIDC_ADMIN_GROUP": "gpu-course-staff"})
        assert auth.token_url.endswith("/token") and auth.username_claim == "preferred_username"
    else:
        assert auth.issuer == "https://moodle.school.edu" and auth.client_id == {"abc123"} and auth.allow_all


@pytest.mark.parametrize("login, missing", [("native", "LABKIT_ADMIN_PASSWORD"), ("github", "LABKIT_GITHUB_ORG"),
                                            ("google", "LABKIT_GOOGLE_DOMAIN"), ("oidc", "LABKIT_OIDC_GROUP"),
                                            ("lti13", "LABKIT_LTI_JWKS_URL")])
def test_a_login_without_its_settings_stops_the_hub_naming_them(login: str, missing: str) -> None:
    env = {k: v for k, v in ENV[login].items() if k != missing}
    with pytest.raises(hub_setup.HubSetupError, match=missing):
        hub_setup.configure_login(Config(), login=login, instructors=["ingrid"], env=env)
    with pytest.raises(hub_setup.HubSetupError, match="native, github"):
        hub_setup.configure_login(Config(), login="shared-password", env={})


def test_a_weak_instructor_password_is_refused() -> None:
    from jupyterhub import orm

    from labkit.hub_native import CourseNativeAuthenticator

    c = Config()
    hub_setup.configure_login(c, login="native", instructors=["ingrid"], env={"LABKIT_ADMIN_PASSWORD": "short"})
    with pytest.raises(ValueError, match="LABKIT_ADMIN_PASSWORD is refused"):
        CourseNativeAuthenticator(config=c, _deprecated_db_session=orm.new_session_factory("sqlite://")())


def test_self_signed_certificate_and_tls_settings(tmp_path: Path) -> None:
    from cryptography import x509

    cert, key = hub_setup.make_self_signed(tmp_path, ["dgx.example.org", "127.0.0.1"])
    sans = x509.load_pem_x509_certificate(cert.read_bytes()).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["dgx.example.org"]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert key.stat().st_mode & 0o077 == 0
    again = hub_setup.make_self_signed(tmp_path, ["dgx.example.org"])  # still covers the host: kept
    assert again == (cert, key) and again[0].read_bytes() == cert.read_bytes()
    c = Config()
    assert hub_setup.configure_tls(c, cert=cert, key=key) == (cert, key) and c.JupyterHub.ssl_key == str(key)
    with pytest.raises(hub_setup.HubSetupError, match="go together"):
        hub_setup.configure_tls(Config(), cert=cert)
    with pytest.raises(hub_setup.HubSetupError, match="does not exist"):
        hub_setup.configure_tls(Config(), cert=tmp_path / "no.crt", key=key)


def test_culler_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Config()
    service = hub_setup.configure_culler(c, idle_minutes=60)
    assert "--timeout=3600" in service["command"] and service["command"][1:3] == ["-m", "jupyterhub_idle_culler"]
    assert "--max-age=36000" in service["command"]  # however active a server says it is (red team #11)
    (role,) = [r for r in c.JupyterHub.load_roles if r["name"] == "idle-culler"]
    assert set(role["scopes"]) >= {"list:users", "read:servers", "delete:servers"}
    assert hub_setup.configure_culler(Config(), idle_minutes=0) is None
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(hub_setup.HubSetupError, match="jupyterhub-idle-culler is not installed"):
        hub_setup.configure_culler(Config(), idle_minutes=60)


# ---------------------------------------------------------------------------------------------- course updates


def git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def test_nbgitpuller_brings_a_new_course_version_and_keeps_the_learners_edits(tmp_path: Path, monkeypatch) -> None:
    """What an nbgitpuller link does (``/hub/user-redirect/git-pull?repo=...``): the first visit clones the course,
    later ones merge the new version into the learner's copy; the learner's edits stay, new labs arrive."""
    pull = pytest.importorskip("nbgitpuller.pull")
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "learner" if "NAME" in key else "learner@example.org")
    course = tmp_path / "course"
    course.mkdir()
    git(course, "init", "-q", "-b", "main")
    (course / "02-first-kernels.py").write_text("# lab 02, version 1\n")
    (course / "README.md").write_text("the course\n")
    git(course, "add", ".")
    git(course, "commit", "-q", "-m", "v1")
    work = tmp_path / "home" / "dgx-course"

    def visit() -> None:
        for _ in pull.GitPuller(f"file://{course}", str(work), branch="main", depth=None).pull():
            pass

    visit()  # the first click: a clone
    assert (work / "02-first-kernels.py").read_text() == "# lab 02, version 1\n"
    (work / "02-first-kernels.py").write_text("# lab 02, version 1\nmy_kernel = 'my own answer'\n")  # the learner works
    (work / "notes.txt").write_text("mine\n")
    (course / "03-memory.py").write_text("# lab 03\n")  # the instructor publishes the next lab and fixes the README
    (course / "README.md").write_text("the course, corrected\n")
    (course / "02-first-kernels.py").write_text("# lab 02, version 2 (the instructor's fix)\n")  # and the learner's lab too
    git(course, "add", ".")
    git(course, "commit", "-q", "-m", "v2")
    visit()
    assert "my own answer" in (work / "02-first-kernels.py").read_text()  # the learner's version wins where both changed
    assert (work / "notes.txt").read_text() == "mine\n"
    assert (work / "03-memory.py").read_text() == "# lab 03\n" and (work / "README.md").read_text() == "the course, corrected\n"


def test_classroom_guide_covers_what_an_admin_needs_and_the_unit_runs_the_hub() -> None:
    import configparser

    root = Path(__file__).resolve().parents[1]
    text = (root / "course" / "classroom.md").read_text()
    for needed in ("LABKIT_LOGIN", "LABKIT_ADMIN_PASSWORD", "/hub/authorize", "LABKIT_TLS_CERT", "self-signed",
                   "jupyterhub-idle-culler", "docker push", "StorageClass", "labkit-hub.service", "systemctl",
                   "nvidia.com/mig.config.state", "nbgitpuller", "--k8s-profiles", "lti13", "OAUTH_CLIENT_ID"):
        assert needed in text, f"course/classroom.md does not say {needed!r}"
    for login in hub_setup.LOGINS:
        assert f"| `{login}`" in text, f"classroom.md's login table lacks {login}"
    unit = configparser.ConfigParser(interpolation=None)
    unit.read_string((root / "deploy" / "jupyterhub" / "labkit-hub.service").read_text())
    assert unit["Service"]["ExecStart"].endswith("-f /opt/course/deploy/jupyterhub/jupyterhub_config.py")
    assert unit["Service"]["EnvironmentFile"] == "/etc/labkit-hub.env" and unit["Service"]["KillMode"] == "process"
    assert "docker.service" in unit["Unit"]["Requires"]


def test_the_live_pages_refresh_interval_reaches_the_service() -> None:
    """configure_hub's ``refresh_s`` (5 s by default) is the service's ``--refresh-s``; a period that is not a positive
    number is refused by both, with a message."""
    from labkit import progress_service as ps

    c = Config()
    ps.configure_hub(c, public_url="https://hub.example.org")
    command = c.JupyterHub.services[0]["command"]
    assert command[command.index("--refresh-s") + 1] == "5" and ps.REFRESH_S == 5
    ps.configure_hub(c, public_url="https://hub.example.org", refresh_s=1.5)
    command = next(s for s in c.JupyterHub.services if s["name"] == ps.SERVICE_NAME)["command"]
    assert command[command.index("--refresh-s") + 1] == "1.5"
    for bad in (0, -1, float("nan"), "5"):
        with pytest.raises(ValueError, match="refresh_s"):
            ps.configure_hub(Config(), public_url="https://hub.example.org", refresh_s=bad)
    with pytest.raises(SystemExit) as refused:
        ps.main(["--refresh-s", "0"])
    assert refused.value.code == 2
