"""Red team, round 3 (shared/reviews/classroom-review-3.md), the deployment as configured: the DGX hub's
configuration (deploy/jupyterhub/jupyterhub_config.py, loaded as JupyterHub loads it, Docker replaced by a stand-in
that answers only the network question), the Kubernetes values through a real KubeSpawner (tests/test_kubespawner),
the self-signed certificate (a real TLS handshake on loopback) and the MIG allocator.

Findings replayed: #7 (the self-signed certificate was a CA whose key minted a certificate for another site), #8
(no PID limit, default capabilities, one shared network), #10 (Kubernetes logins over plain HTTP), #11 (no maximum
age), #13 (state world-readable), #15 (the learner pod's security context, disk, privileged init container; its pods: tests/test_kubespawner.py), #16
(``container:<name>`` user names), #20 (the admin password in the proxy's environment, no HSTS), and the
configuration half of #1 (user config in learners' servers, subdomains)."""

from __future__ import annotations

import datetime
import os
import socket
import ssl
import stat
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("jupyterhub")

from labkit import hub_setup  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy" / "jupyterhub"


class FakeVolumes:
    """Docker's volumes API as far as the config's home-size check uses it: records each volume made; ``quota``
    False answers as a daemon whose /var/lib/docker has no project quotas."""

    def __init__(self, quota: bool = True) -> None:
        self.quota, self.made, self.removed = quota, [], []

    def create(self, name, driver, driver_opts):
        if not self.quota and "size" in driver_opts:
            raise RuntimeError("500 Server Error: quota size requested but no quota support")
        self.made.append((name, driver, dict(driver_opts)))
        return SimpleNamespace(remove=lambda force=False: self.removed.append(name))


def load_dgx(tmp_path, monkeypatch, icc="false", volumes=None, **env):
    """The DGX configuration as JupyterHub loads it; Docker answers only for the network (its ICC option) and
    volumes (:class:`FakeVolumes`)."""
    from traitlets.config import Config

    docker = pytest.importorskip("docker")
    network = SimpleNamespace(attrs={"Options": {"com.docker.network.bridge.enable_icc": icc}})
    volumes = volumes if volumes is not None else FakeVolumes()
    monkeypatch.setattr(docker, "from_env", lambda: SimpleNamespace(networks=SimpleNamespace(get=lambda name: network),
                                                                     volumes=volumes))
    base = {"LABKIT_STATE_DIR": str(tmp_path / "state"), "LABKIT_MIG_SLICES": "MIG-a,MIG-b", "LABKIT_INSTRUCTORS": "ingrid",
            "LABKIT_INSTRUCTOR_GPUS": "7", "LABKIT_ADMIN_PASSWORD": "instructor-password-1234",
            "LABKIT_HUB_HOSTNAME": "dgx.example.org"}
    for k in ("LABKIT_LOGIN", "LABKIT_TLS", "LABKIT_SUBDOMAIN_HOST", "LABKIT_DISK_LIMIT", "LABKIT_ALLOW_ICC",
              "LABKIT_HOME_SIZE", "LABKIT_SIGNUP_CODE", "LABKIT_ADMIN_PASSWORD_FILE", "LABKIT_SIGNUP"):
        monkeypatch.delenv(k, raising=False)
    for k, v in {**base, **env}.items():
        monkeypatch.setenv(k, v)
    c = Config()
    umask = os.umask(0o022)
    try:
        path = DEPLOY / "jupyterhub_config.py"
        exec(compile(path.read_text(), str(path), "exec"), {"get_config": lambda: c, "__file__": str(path)})
    finally:
        os.umask(umask)
    return c


def host_config(c, name="alice"):
    dockerspawner = pytest.importorskip("dockerspawner")
    user = SimpleNamespace(name=name, groups=[], id=1, url=f"/user/{name}/", escaped_name=name, server=None, spawners={})
    sp = dockerspawner.DockerSpawner(config=c, user=user)
    return sp._render_templates(sp._eval_if_callable(sp.extra_host_config))


# ---------------------------------------------------------------------------------------------- #8, #11, #13, #20, #1


def test_dgx_learner_containers_are_hardened(tmp_path, monkeypatch):
    """#8: the recorded HostConfig had no PidsLimit, CapDrop or SecurityOpt. Now every learner's host config has
    them, and docker-py turns them into the Docker API's fields (no daemon needed)."""
    c = load_dgx(tmp_path, monkeypatch, LABKIT_DISK_LIMIT="20G")
    hc = host_config(c)
    assert hc["pids_limit"] == hub_setup.PIDS_LIMIT and hc["cap_drop"] == ["ALL"] and "cap_add" not in hc
    assert hc["security_opt"] == ["no-new-privileges:true"] and not hc.get("privileged")
    assert not any("unconfined" in o for o in hc["security_opt"])  # Docker's default seccomp profile stays on
    assert hc["device_requests"][0]["device_ids"] == ["MIG-a"]
    from docker.types import HostConfig

    api = HostConfig(version="1.43", **{k: (list(v) if isinstance(v, list) else v) for k, v in hc.items()})
    assert api["PidsLimit"] == hub_setup.PIDS_LIMIT and api["CapDrop"] == ["ALL"]
    assert api["SecurityOpt"] == ["no-new-privileges:true"] and api["StorageOpt"] == {"size": "20G"}
    assert c.DockerSpawner.mem_limit == "16G"  # memory limit, as before


def test_dgx_hub_refuses_a_network_where_learners_reach_each_other(tmp_path, monkeypatch):
    with pytest.raises(hub_setup.HubSetupError, match="enable_icc=false"):
        load_dgx(tmp_path, monkeypatch, icc="true")
    load_dgx(tmp_path, monkeypatch, icc="true", LABKIT_ALLOW_ICC="1")  # the admin's explicit choice


def test_dgx_culler_has_a_maximum_age(tmp_path, monkeypatch):
    """#11: a learner's own activity posts kept her server (and slice) for ever. Now any server is stopped after
    LABKIT_MAX_AGE_HOURS (10 h by default) however active it says it is."""
    c = load_dgx(tmp_path, monkeypatch)
    (culler,) = [s for s in c.JupyterHub.services if s["name"] == "idle-culler"]
    assert "--max-age=36000" in culler["command"]


def test_dgx_state_is_private_and_the_proxy_gets_no_password(tmp_path, monkeypatch):
    """#13: jupyterhub.sqlite (every bcrypt hash) was 0644 in a 0755 folder. #20: the proxy inherited
    LABKIT_ADMIN_PASSWORD. Now the state folder is 0700, an existing database 0600, and the password is gone from
    the environment the hub's children (the proxy first) inherit."""
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    (state / "jupyterhub.sqlite").write_text("")
    os.chmod(state / "jupyterhub.sqlite", 0o644)
    c = load_dgx(tmp_path, monkeypatch)
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state / "jupyterhub.sqlite").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(state / "tls" / "hub-selfsigned.key").st_mode) == 0o600
    assert "LABKIT_ADMIN_PASSWORD" not in os.environ
    assert c.CourseNativeAuthenticator.instructor_password == "instructor-password-1234"
    assert c.CourseNativeAuthenticator.trusted_proxies == ["172.17.0.1"]  # the proxy's own address, not the containers'
    unit = (DEPLOY / "labkit-hub.service").read_text()
    assert "UMask=0077" in unit


def test_dgx_origins_cookies_and_hsts(tmp_path, monkeypatch, capsys):
    """The configuration half of #1 and #20: learners' servers ignore config in their home (the takeover's first
    step was ~/.jupyter/jupyter_server_config.py), login cookies are SameSite, the hub sends HSTS; with
    LABKIT_SUBDOMAIN_HOST every server is on its own origin and the self-signed certificate covers *.<host>."""
    c = load_dgx(tmp_path, monkeypatch)
    assert c.Spawner.disable_user_config is True and c.Spawner.environment["PYTHONNOUSERSITE"] == "1"
    assert c.JupyterHub.tornado_settings["cookie_options"]["samesite"] == "Lax"
    assert c.JupyterHub.tornado_settings["headers"]["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    assert "subdomain_host" not in c.JupyterHub
    # R4-1: no notebook is trusted in a learner's server (the notary: tests/test_classroom_trust.py)
    assert "--ServerApp.contents_manager_class=labkit.classroom.notary.UntrustingContentsManager" in c.Spawner.args
    # R4-10: the proxy offers no CBC suite in TLS 1.2
    ciphers = c.ConfigurableHTTPProxy.command[c.ConfigurableHTTPProxy.command.index("--ssl-ciphers") + 1]
    assert "CBC" not in ciphers and not any(x.endswith("-SHA") for x in ciphers.split(":")), ciphers
    assert "labkit hub: one origin" in capsys.readouterr().err  # the hub says which mode it runs in
    c = load_dgx(tmp_path / "sub", monkeypatch, LABKIT_SUBDOMAIN_HOST="https://hub.school.example")
    assert "labkit hub: per-user subdomains (LABKIT_SUBDOMAIN_HOST=https://hub.school.example)" in capsys.readouterr().err
    assert c.JupyterHub.subdomain_host == "https://hub.school.example" and c.JupyterHub.cookie_host_prefix_enabled
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(Path(c.JupyterHub.ssl_cert).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert {"hub.school.example", "*.hub.school.example"} <= set(names)


def test_dgx_instructors_are_not_admins_and_nobody_is(tmp_path, monkeypatch):
    """R4-1: instructors were hub admins (``access:servers`` on every learner's server). Now the configuration
    gives them the teaching role, which holds no scope that opens a server, mints a token or makes an admin, and
    sets the admin role's membership, empty. (The hub's 403: tests/test_hub.py on JupyterHub 6 and 5.)"""
    c = load_dgx(tmp_path, monkeypatch)
    assert c.Authenticator.admin_users == set()
    roles = {r["name"]: r for r in c.JupyterHub.load_roles}
    assert roles["admin"] == {"name": "admin", "users": []}
    teaching = roles["teaching"]
    assert teaching["users"] == ["ingrid"] and "instructors" in teaching["groups"]
    assert hub_setup.APPROVE_SCOPE in teaching["scopes"] and "servers" in teaching["scopes"]
    held = {s.split("!")[0] for r in roles.values() if "ingrid" in r.get("users", []) for s in r.get("scopes", [])}
    assert not held & set(hub_setup.NEVER_FOR_INSTRUCTORS), held
    assert not any(s.startswith("access:servers") for s in held)
    # R4-10: learners' tokens and logins have a lifetime
    assert c.JupyterHub.token_expires_in_max_seconds == 12 * 3600 and c.JupyterHub.cookie_max_age_days == 0.5


def test_dgx_home_volume_has_a_size_limit(tmp_path, monkeypatch):
    """R4-8: a learner's home was a named volume with no size limit. Now it is made with the local driver's size
    option (10G by default), the hub proves at start that this host can make such a volume, and refuses to start
    where it cannot, unless LABKIT_HOME_SIZE=off says so."""
    volumes = FakeVolumes()
    c = load_dgx(tmp_path, monkeypatch, volumes=volumes)
    (mount,) = c.DockerSpawner.mounts
    assert mount["target"] == "/home/learner" and mount["driver_config"] == {"Name": "local", "Options": {"size": "10G"}}
    assert volumes.made and volumes.made[0][2] == {"size": "10G"} and volumes.removed == [volumes.made[0][0]]
    from docker.types import Mount

    spec = Mount(**{**mount, "source": "labkit-home-alice"})  # what DockerSpawner sends to Docker
    assert spec["VolumeOptions"]["DriverConfig"]["Options"] == {"size": "10G"}
    with pytest.raises(hub_setup.HubSetupError, match="project quotas"):
        load_dgx(tmp_path / "b", monkeypatch, volumes=FakeVolumes(quota=False))
    c = load_dgx(tmp_path / "c", monkeypatch, volumes=FakeVolumes(quota=False), LABKIT_HOME_SIZE="off")
    assert "driver_config" not in c.DockerSpawner.mounts[0]


def test_dgx_signup_needs_the_class_code_and_the_password_can_come_from_a_file(tmp_path, monkeypatch, capsys):
    """R4-6: the sign-up form was open to anyone. Now the DGX config makes a class code once (0600, in the state
    folder) and prints it; R4-10: the admin password can come from a file, so no environment holds it."""
    secret = tmp_path / "admin-password"
    secret.write_text("instructor-password-1234\n")
    monkeypatch.delenv("LABKIT_ADMIN_PASSWORD", raising=False)
    c = load_dgx(tmp_path, monkeypatch, LABKIT_ADMIN_PASSWORD="", LABKIT_ADMIN_PASSWORD_FILE=str(secret))
    assert c.CourseNativeAuthenticator.instructor_password == "instructor-password-1234"
    code = c.CourseNativeAuthenticator.signup_code
    path = tmp_path / "state" / "signup-code"
    assert len(code) >= 14 and path.read_text().strip() == code and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    err = capsys.readouterr().err
    assert code in err and "one origin" in err  # the hub says its sign-up code and which origin mode it runs in
    assert load_dgx(tmp_path, monkeypatch).CourseNativeAuthenticator.signup_code == code  # kept across restarts


# ---------------------------------------------------------------------------------------------- #7


def _serve_tls(cert: Path, key: Path):
    """A one-connection TLS server on loopback with this pair: (port, thread)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(10)

    def run():
        try:
            conn, _ = srv.accept()
            with ctx.wrap_socket(conn, server_side=True) as s:
                s.recv(1)
        except (OSError, ssl.SSLError):
            pass
        finally:
            srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return srv.getsockname()[1], t


def _handshake(port: int, cafile: Path, name: str) -> bool:
    ctx = ssl.create_default_context(cafile=str(cafile))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname=name) as s:
            s.sendall(b"x")
            return True
    except ssl.SSLError:
        return False


def test_the_self_signed_certificate_cannot_vouch_for_another_site(tmp_path):
    """#7: with the hub's key the red team minted a certificate for accounts.google.com that a client trusting
    hub-selfsigned.crt accepted. Now the hub's certificate is a leaf (CA:FALSE, serverAuth, digitalSignature): a
    client trusting it still reaches the hub, and refuses the minted certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    cert_path, key_path = hub_setup.make_self_signed(tmp_path / "tls", ["localhost", "127.0.0.1"])
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    ku = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.digital_signature and not ku.key_cert_sign
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    port, t = _serve_tls(cert_path, key_path)
    assert _handshake(port, cert_path, "localhost")  # the hub itself: trusted
    t.join(10)
    # the attack: a certificate for another site, signed with the hub's key, issued by the hub's name
    hub_key = serialization.load_pem_private_key(key_path.read_bytes(), None)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    forged = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "accounts.google.com")]))
              .issuer_name(cert.subject).public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([x509.DNSName("accounts.google.com")]), critical=False)
              .sign(hub_key, hashes.SHA256()))
    (tmp_path / "forged.crt").write_bytes(forged.public_bytes(serialization.Encoding.PEM) + cert_path.read_bytes())
    (tmp_path / "forged.key").write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                                 serialization.NoEncryption()))
    port, t = _serve_tls(tmp_path / "forged.crt", tmp_path / "forged.key")
    assert not _handshake(port, cert_path, "accounts.google.com"), "a client trusting the hub's certificate accepted another site"
    t.join(10)


def test_an_old_ca_certificate_is_replaced(tmp_path):
    """A hub that made its pair before this fix gets a leaf at its next start (the old CA is not kept)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = tmp_path / "tls"
    folder.mkdir()
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    old = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
           .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=300))
           .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
           .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    (folder / "hub-selfsigned.crt").write_bytes(old.public_bytes(serialization.Encoding.PEM))
    (folder / "hub-selfsigned.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                                  serialization.NoEncryption()))
    cert_path, _ = hub_setup.make_self_signed(folder, ["localhost"])
    new = x509.load_pem_x509_certificate(cert_path.read_bytes())
    assert new.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


# ---------------------------------------------------------------------------------------------- #10, #15 (Kubernetes)


def test_kubernetes_values_serve_https_and_cull_by_age():
    import yaml

    values = yaml.safe_load((ROOT / "deploy" / "k8s" / "values.yaml").read_text())
    https = values["proxy"]["https"]
    assert https["enabled"] is True and https["hosts"] and https["type"] in ("letsencrypt", "secret", "offload")
    assert values["cull"]["maxAge"] > 0 and values["cull"]["enabled"]
    assert values["singleuser"]["cloudMetadata"]["blockWithIptables"] is False  # no privileged root init container
    assert "configure_origins" in values["hub"]["extraConfig"]["00-labkit-login"]
    assert "trusted_proxies" in values["hub"]["extraConfig"]["00-labkit-login"]


# ---------------------------------------------------------------------------------------------- #16


def test_a_user_named_like_a_rebuilt_container_key_gets_no_slice(tmp_path):
    """#16: after a rebuild from the containers ({"container:jupyter-bob": "MIG-a"}), a learner named
    ``container:jupyter-bob`` was handed bob's slice. Now the allocator refuses such names (and sign-up never
    accepts a ':')."""
    import sys

    sys.path.insert(0, str(DEPLOY))
    import mig_allocator as alloc

    (tmp_path / "s.json").write_text("{damaged")
    a = alloc.SliceAllocator(["MIG-a", "MIG-b"], state_file=tmp_path / "s.json",
                             rebuild=lambda: {"container:jupyter-bob": "MIG-a"})
    with pytest.raises(alloc.NoSliceLeft, match="contains ':'"):
        a.assign("container:jupyter-bob")
    assert a.assign("bob", container="jupyter-bob") == "MIG-a"  # bob still gets his own slice back


def test_labkit_hub_says_which_origin_mode_and_what_it_means(monkeypatch, capsys):
    """Issue 40 item 2: `labkit hub` says plainly which mode the hub runs in with this environment."""
    from labkit import cli

    monkeypatch.delenv("LABKIT_SUBDOMAIN_HOST", raising=False)
    monkeypatch.setenv("LABKIT_INSTRUCTORS", "ingrid")
    assert cli.main(["hub"]) == 0
    out = capsys.readouterr().out
    assert "one origin" in out and "instructors get 403" in out and "recommended" in out and "ingrid" in out
    monkeypatch.setenv("LABKIT_SUBDOMAIN_HOST", "https://hub.school.example")
    assert cli.main(["hub"]) == 0
    assert "per-user subdomains (LABKIT_SUBDOMAIN_HOST=https://hub.school.example)" in capsys.readouterr().out
