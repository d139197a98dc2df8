"""JupyterHub settings the course's hub configurations share: who logs in, TLS, the idle culler, and what keeps a
hostile learner contained (:func:`configure_origins`, :func:`container_hardening`, :func:`check_docker_network`,
:func:`harden_kubespawner`, :func:`secure_state`; course/classroom.md, "Threat model").

The DGX configuration (``deploy/jupyterhub/jupyterhub_config.py``), the Kubernetes values
(``deploy/k8s/values.yaml``, extraConfig) and the test hub (``tests/test_hub.py``) all call these functions, so what
the tests start is what a classroom runs. Nothing here is imported by ``import labkit``; the authenticators, the
culler and ``cryptography`` are imported only when a function needs them.

Logins (:func:`configure_login`, ``LABKIT_LOGIN``):

``native`` (the default)
    Own accounts on the hub, no outside service: learners sign up at ``/hub/signup``; an instructor approves each
    at ``/hub/authorize``. The instructors' accounts are made from the configuration
    (:class:`labkit.hub_native.CourseNativeAuthenticator`, ``LABKIT_ADMIN_PASSWORD``), and nobody can sign up under
    an instructor's name.
``github`` / ``google`` / ``oidc``
    OAuthenticator: GitHub (members of ``LABKIT_GITHUB_ORG``), Google (accounts of ``LABKIT_GOOGLE_DOMAIN``) or any
    OpenID Connect provider (``LABKIT_OIDC_*``). The client id, secret and callback URL come from OAuthenticator's
    own ``OAUTH_CLIENT_ID``, ``OAUTH_CLIENT_SECRET`` and ``OAUTH_CALLBACK_URL``.
``lti13``
    Logins from a learning management system (Moodle, Canvas, ...) through LTI 1.3 (``LABKIT_LTI_*``).

In every case the instructors are **not** hub admins: they hold the ``teaching`` role (:data:`TEACHING_SCOPES`:
approve and un-approve learners, start and stop their servers, read users and servers, the admin page) and the
``instructor`` role (the progress page, :func:`labkit.progress_service.configure_hub`), and never ``access:servers``
on a learner's server, so the hub answers 403 when an instructor's browser opens ``/user/<learner>/``. Nobody holds
JupyterHub's ``admin`` role (its membership is set, empty, in the configuration, which also takes the flag from
accounts made admins before): the hub's administrator is whoever edits its configuration on the host
(:func:`configure_roles`).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

#: The logins :func:`configure_login` knows.
LOGINS = ("native", "github", "google", "oidc", "lti13")
#: The shortest password NativeAuthenticator accepts at sign-up (and for the instructors' accounts).
MIN_PASSWORD = 10
#: A server is stopped after this many hours however active it is (a class day): activity is self-reported.
MAX_AGE_HOURS = 10.0
#: The scopes the idle culler's service needs (jupyterhub-idle-culler's README).
CULLER_SCOPES = ["list:users", "read:users:activity", "read:servers", "delete:servers"]
#: The custom scope that approves and un-approves accounts at ``/hub/authorize`` (:mod:`labkit.hub_native`).
APPROVE_SCOPE = "custom:labkit:approve"
#: What teaching needs on the hub (the ``teaching`` role): the admin page, users and their servers' state, starting
#: and stopping servers, deleting accounts, approvals. Never ``access:servers`` (a learner's server in the
#: instructor's browser), ``tokens`` (a token in a learner's name), ``admin:users`` (passwords, admin flags),
#: ``shares`` or ``groups`` (each of which would give one of the others).
TEACHING_SCOPES = ["admin-ui", "list:users", "read:users", "read:servers", "servers", "delete:users", APPROVE_SCOPE]
#: Scopes the teaching role must never hold: each reaches a learner's server or makes an admin.
NEVER_FOR_INSTRUCTORS = (
    "access:servers",
    "tokens",
    "admin:users",
    "admin:servers",
    "users",
    "shares",
    "groups",
    "admin:groups",
    "admin:auth_state",
    "inherit",
)
#: Hours an API token or a login lasts (``LABKIT_SESSION_HOURS``): a class day; then the learner logs in again.
SESSION_HOURS = 12.0


class HubSetupError(ValueError):
    """A hub setting that is missing or wrong; the message says which and how to set it."""


def _need(env: Mapping[str, str], key: str, why: str) -> str:
    value = env.get(key, "").strip()
    if not value:
        raise HubSetupError(f"{key} is not set: {why}")
    return value


def _names(text: str) -> set[str]:
    return {n.strip() for n in text.split(",") if n.strip()}


def instructors_from(env: Mapping[str, str] | None = None) -> list[str]:
    """The instructors' user names in ``LABKIT_INSTRUCTORS`` (comma-separated; default ``os.environ``), sorted, each once."""
    env = os.environ if env is None else env
    return sorted(_names(env.get("LABKIT_INSTRUCTORS", "")))


def configure_login(
    c: Any, *, login: str = "native", instructors: Iterable[str] = (), env: Mapping[str, str] | None = None
) -> str:
    """Set the hub's authenticator for ``login`` (one of :data:`LOGINS`); returns the authenticator class's name.

    Settings are read from ``env`` (default ``os.environ``); a missing one raises :class:`HubSetupError` naming it,
    so a hub never starts with a login that lets anyone in.
    """
    env = os.environ if env is None else env
    login = (login or "native").strip().lower()
    admins = set(instructors)
    hours = env.get("LABKIT_SESSION_HOURS", "").strip()
    try:
        session_hours = float(hours) if hours else SESSION_HOURS
    except ValueError:
        raise HubSetupError(f"LABKIT_SESSION_HOURS={hours!r} is not a number of hours (default {SESSION_HOURS:g})") from None
    configure_roles(c, instructors=admins, session_hours=session_hours)
    if login == "native":
        c.JupyterHub.authenticator_class = "labkit.hub_native.CourseNativeAuthenticator"
        # LABKIT_SIGNUP=off once every learner has an account: the sign-up form is gone (404)
        c.NativeAuthenticator.enable_signup = env.get("LABKIT_SIGNUP", "on").strip().lower() not in ("off", "0", "false", "no")
        c.NativeAuthenticator.open_signup = False  # an instructor approves every account
        c.NativeAuthenticator.minimum_password_length = MIN_PASSWORD
        c.NativeAuthenticator.check_common_password = True
        # NativeAuthenticator's own lockout counts failures per name from anywhere: anyone could keep the instructor
        # out with one wrong password every 2 minutes. CourseNativeAuthenticator limits per address instead.
        c.NativeAuthenticator.allowed_failed_logins = 0
        c.Authenticator.allow_all = True  # who may log in is decided by the instructor's approval
        password = admin_password(env)
        if admins and not password:
            raise HubSetupError(
                "LABKIT_ADMIN_PASSWORD is not set: the instructors' accounts "
                f"({', '.join(sorted(admins))}) are made with it when the hub starts "
                f"(at least {MIN_PASSWORD} characters; change it later at /hub/change-password)."
            )
        c.CourseNativeAuthenticator.instructor_password = password
        c.CourseNativeAuthenticator.instructors = sorted(admins)
        # the class's sign-up code (the DGX config makes one in its state folder when it is not set)
        c.CourseNativeAuthenticator.signup_code = env.get("LABKIT_SIGNUP_CODE", "").strip()
        if env is os.environ:  # read once: the proxy and every other child of the hub start without it
            os.environ.pop("LABKIT_ADMIN_PASSWORD", None)
            os.environ.pop("LABKIT_ADMIN_PASSWORD_FILE", None)
        return "CourseNativeAuthenticator"
    if login == "github":
        c.JupyterHub.authenticator_class = "github"
        c.GitHubOAuthenticator.allowed_organizations = _names(
            _need(
                env,
                "LABKIT_GITHUB_ORG",
                "the GitHub organisation (or org:team) whose members may log in, e.g. my-school:gpu-2026",
            )
        )
        c.GitHubOAuthenticator.scope = ["read:org"]
        return "GitHubOAuthenticator"
    if login == "google":
        c.JupyterHub.authenticator_class = "google"
        c.GoogleOAuthenticator.hosted_domain = sorted(
            _names(_need(env, "LABKIT_GOOGLE_DOMAIN", "the Google Workspace domain whose accounts may log in, e.g. school.edu"))
        )
        c.GoogleOAuthenticator.login_service = "your school's Google account"
        c.GoogleOAuthenticator.allow_all = True  # every account of the hosted domain(s)
        return "GoogleOAuthenticator"
    if login == "oidc":
        c.JupyterHub.authenticator_class = "generic-oauth"
        g = c.GenericOAuthenticator
        g.authorize_url = _need(env, "LABKIT_OIDC_AUTHORIZE_URL", "the provider's authorization endpoint")
        g.token_url = _need(env, "LABKIT_OIDC_TOKEN_URL", "the provider's token endpoint")
        g.userdata_url = _need(env, "LABKIT_OIDC_USERDATA_URL", "the provider's userinfo endpoint")
        g.scope = ["openid", "profile", "email"]
        g.username_claim = env.get("LABKIT_OIDC_USERNAME_CLAIM", "preferred_username")
        g.login_service = env.get("LABKIT_OIDC_NAME", "your school's login")
        # the provider's groups become the hub's (OAuthenticator needs that for allowed_groups); its group named
        # `instructors`, if any, then holds the instructor role (labkit.progress_service.configure_hub loads no groups)
        g.manage_groups = True
        g.auth_state_groups_key = "oauth_user.groups"
        g.allowed_groups = _names(_need(env, "LABKIT_OIDC_GROUP", "the provider's group whose members may log in"))
        if env.get("LABKIT_OIDC_ADMIN_GROUP", "").strip():
            raise HubSetupError(
                "LABKIT_OIDC_ADMIN_GROUP is no longer used: instructors are not hub admins. Name the provider's group "
                "of instructors `instructors` (it then holds the teaching and instructor roles), or list them in "
                "LABKIT_INSTRUCTORS, and unset LABKIT_OIDC_ADMIN_GROUP."
            )
        g.admin_groups = set()
        return "GenericOAuthenticator"
    if login == "lti13":
        c.JupyterHub.authenticator_class = "ltiauthenticator.lti13.auth.LTI13Authenticator"
        lti = c.LTI13Authenticator
        lti.issuer = _need(env, "LABKIT_LTI_ISSUER", "the platform's issuer (e.g. https://moodle.school.edu)")
        lti.authorize_url = _need(env, "LABKIT_LTI_AUTHORIZE_URL", "the platform's OIDC authentication endpoint")
        lti.jwks_endpoint = _need(env, "LABKIT_LTI_JWKS_URL", "the platform's public keyset URL")
        lti.client_id = _names(_need(env, "LABKIT_LTI_CLIENT_ID", "the client id the platform gave the tool"))
        lti.username_key = env.get("LABKIT_LTI_USERNAME_KEY", "sub")
        c.Authenticator.allow_all = True  # the platform decides who reaches the tool (the course's members)
        return "LTI13Authenticator"
    raise HubSetupError(f"LABKIT_LOGIN={login!r} is not a login this course configures: choose one of {', '.join(LOGINS)}.")


def admin_password(env: Mapping[str, str]) -> str:
    """The instructors' first password: the file ``LABKIT_ADMIN_PASSWORD_FILE`` names (0600, root's; the hub's
    environment then never holds the password, not even the copy the kernel keeps of the environment it was
    started with), else ``LABKIT_ADMIN_PASSWORD``."""
    path = env.get("LABKIT_ADMIN_PASSWORD_FILE", "").strip()
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise HubSetupError(f"LABKIT_ADMIN_PASSWORD_FILE={path}: cannot read it ({exc.strerror})") from None
    return env.get("LABKIT_ADMIN_PASSWORD", "")


def signup_code(folder: str | Path, env: Mapping[str, str] | None = None) -> str:
    """The class's sign-up code: ``LABKIT_SIGNUP_CODE``, else one made once and kept in ``folder/signup-code``
    (0600): the hub's log and that file tell it to the instructor, who tells the room."""
    import secrets

    env = os.environ if env is None else env
    given = env.get("LABKIT_SIGNUP_CODE", "").strip()
    if given:
        return given
    path = Path(folder) / "signup-code"
    if path.is_file() and path.read_text().strip():
        return path.read_text().strip()
    code = "-".join(secrets.token_hex(2) for _ in range(3))
    path.touch(mode=0o600)
    path.write_text(code + "\n")
    os.chmod(path, 0o600)
    return code


def configure_roles(
    c: Any, *, instructors: Iterable[str] = (), group: str = "instructors", session_hours: float = SESSION_HOURS
) -> dict[str, Any]:
    """Least privilege on the hub: the ``teaching`` role (:data:`TEACHING_SCOPES`) for ``instructors`` and the
    ``group``; nobody in JupyterHub's ``admin`` role (no ``admin_users``; the role's membership set, empty, in the
    configuration, so an account made admin earlier loses the flag at the next start); API tokens and logins that
    last ``session_hours``. Returns the teaching role."""
    bad = [s for s in TEACHING_SCOPES if s.split("!")[0] in NEVER_FOR_INSTRUCTORS]
    if bad:  # pragma: no cover - a guard on this module's own constant
        raise HubSetupError(f"the teaching role must not hold {bad}")
    c.Authenticator.admin_users = set()
    custom = _merged(c.JupyterHub, "custom_scopes")
    custom[APPROVE_SCOPE] = {"description": "Approve and un-approve accounts (labkit's /hub/authorize)."}
    c.JupyterHub.custom_scopes = custom
    role = {
        "name": "teaching",
        "description": "Approves learners, starts and stops their servers, reads users and servers; never opens them",
        "scopes": list(TEACHING_SCOPES),
        "users": sorted(instructors),
        "groups": [group],
    }
    roles = [r for r in _listed(c.JupyterHub, "load_roles") if r.get("name") not in ("teaching", "admin")]
    c.JupyterHub.load_roles = [*roles, role, {"name": "admin", "users": []}]
    if session_hours > 0:
        seconds = int(session_hours * 3600)
        c.JupyterHub.token_expires_in_max_seconds = seconds  # a token minted without an expiry gets this one
        c.JupyterHub.cookie_max_age_days = session_hours / 24  # the hub's login, and the servers' OAuth tokens
    return role


# ---------------------------------------------------------------------------------------------- TLS

#: The TLS 1.2 suites the proxy offers: ECDHE/DHE with AES-GCM or ChaCha20-Poly1305 (Mozilla's "intermediate"
#: profile); no CBC suites and no SHA-1 MACs. TLS 1.3's own suites are all AEAD and unaffected.
TLS12_CIPHERS = ":".join(
    [
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
        "DHE-RSA-AES128-GCM-SHA256",
        "DHE-RSA-AES256-GCM-SHA384",
    ]
)


def make_self_signed(folder: str | Path, hosts: Iterable[str], *, days: int = 397) -> tuple[Path, Path]:
    """A self-signed server certificate and its key for ``hosts`` (names, ``*.name`` wildcards for per-user
    subdomains, or IP addresses), in ``folder``: (cert, key).

    A leaf, never a certificate authority: ``CA:FALSE``, key usage ``digitalSignature`` only, extended key usage
    ``serverAuth`` only, and the hub's names only. Whoever holds its key can impersonate the hub and nothing else, so
    a browser that trusts it trusts no other site (an unconstrained CA's key could mint a certificate for any site).
    Browsers warn until the certificate is trusted (course/classroom.md says how). An existing pair in ``folder`` is
    kept while it is such a leaf, still covers ``hosts`` and has a month left.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / "hub-selfsigned.crt", folder / "hub-selfsigned.key"
    hosts = [h for h in dict.fromkeys(hosts) if h]
    if not hosts:
        raise HubSetupError("a self-signed certificate needs at least one host name or address")
    now = datetime.datetime.now(datetime.timezone.utc)
    sans: list[Any] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    if cert_path.exists() and key_path.exists():
        try:
            old = x509.load_pem_x509_certificate(cert_path.read_bytes())
            have = set(old.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
            leaf = not old.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
            if leaf and set(sans) <= have and old.not_valid_after_utc - now > datetime.timedelta(days=30):
                return cert_path, key_path
        except (ValueError, x509.ExtensionNotFound):
            pass
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    os.chmod(key_path, 0o600)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def configure_tls(
    c: Any,
    *,
    cert: str | Path | None = None,
    key: str | Path | None = None,
    self_signed_dir: str | Path | None = None,
    hosts: Iterable[str] = (),
) -> tuple[Path, Path]:
    """Serve the hub's public side over HTTPS: the admin's ``cert`` and ``key`` (PEM files), or, without them, a
    self-signed pair made in ``self_signed_dir`` for ``hosts``. Returns the pair in use."""
    if cert or key:
        if not (cert and key):
            raise HubSetupError(
                "LABKIT_TLS_CERT and LABKIT_TLS_KEY go together: set both (PEM files), or neither for a self-signed certificate"
            )
        pair = (Path(cert), Path(key))
        for p in pair:
            if not p.is_file():
                raise HubSetupError(f"the TLS file {p} does not exist (LABKIT_TLS_CERT / LABKIT_TLS_KEY)")
    else:
        if self_signed_dir is None:
            raise HubSetupError(
                "no TLS certificate: set LABKIT_TLS_CERT and LABKIT_TLS_KEY, or give a folder for a self-signed one"
            )
        pair = make_self_signed(self_signed_dir, hosts)
    c.JupyterHub.ssl_cert = str(pair[0])
    c.JupyterHub.ssl_key = str(pair[1])
    # the proxy serves the public side: TLS 1.2 with AEAD suites only (no CBC, no SHA-1 MACs), and TLS 1.3
    command = _listed(c.ConfigurableHTTPProxy, "command") or ["configurable-http-proxy"]
    if "--ssl-ciphers" not in command:
        c.ConfigurableHTTPProxy.command = [*command, "--ssl-ciphers", TLS12_CIPHERS]
    return pair


# ---------------------------------------------------------------------------------------------- the idle culler


def _listed(section: Any, key: str) -> list[Any]:
    """A list already set in a traitlets config section (never traitlets' lazy placeholder), else []."""
    value = dict.get(section, key, [])
    return list(value) if isinstance(value, (list, tuple)) else []


def culler_command(
    timeout_s: int,
    *,
    every_s: int | None = None,
    hub_api_url: str | None = None,
    python: str | None = None,
    max_age_s: int | None = None,
) -> list[str]:
    """The command line of ``jupyterhub-idle-culler`` stopping servers idle ``timeout_s`` seconds, and, with
    ``max_age_s``, every server older than that however active it says it is (a learner's own activity posts cannot
    keep a slice for ever)."""
    cmd = [python or sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={int(timeout_s)}"]
    if max_age_s:
        cmd.append(f"--max-age={int(max_age_s)}")
    if every_s:
        cmd.append(f"--cull-every={int(every_s)}")
    if hub_api_url:
        cmd.append(f"--url={hub_api_url}")
    return cmd


def configure_culler(
    c: Any,
    *,
    idle_minutes: float,
    every_s: int | None = None,
    api_token: str | None = None,
    managed: bool = True,
    python: str | None = None,
    max_age_hours: float = MAX_AGE_HOURS,
) -> dict[str, Any] | None:
    """Stop servers idle ``idle_minutes``, and any server running longer than ``max_age_hours`` (0: no maximum),
    however active (their MIG slices are freed when they stop): the ``idle-culler`` service,
    started by the hub (``managed``) or run elsewhere with ``api_token``, and its role. ``idle_minutes <= 0``: no
    culler. Raises :class:`HubSetupError` when ``jupyterhub-idle-culler`` is not installed (the ``hub`` extra)."""
    if idle_minutes <= 0:
        return None
    import importlib.util

    if managed and importlib.util.find_spec("jupyterhub_idle_culler") is None:
        raise HubSetupError(
            "jupyterhub-idle-culler is not installed in the hub's environment: install the course with "
            "its hub extra (pip install -c constraints.txt -e '.[hub]'), or set LABKIT_IDLE_MINUTES=0 to run "
            "without culling (abandoned servers then keep their slices)"
        )
    service: dict[str, Any] = {"name": "idle-culler"}
    if managed:
        service["command"] = culler_command(
            round(idle_minutes * 60), every_s=every_s, python=python, max_age_s=round(max_age_hours * 3600) or None
        )
    if api_token:
        service["api_token"] = api_token
    services = [s for s in _listed(c.JupyterHub, "services") if s.get("name") != "idle-culler"]
    c.JupyterHub.services = [*services, service]
    roles = [r for r in _listed(c.JupyterHub, "load_roles") if r.get("name") != "idle-culler"]
    c.JupyterHub.load_roles = [*roles, {"name": "idle-culler", "scopes": list(CULLER_SCOPES), "services": ["idle-culler"]}]
    return service


# ---------------------------------------------------------------------------------------------- origins, cookies, state


def _merged(section: Any, key: str) -> dict[str, Any]:
    """A dict already set in a traitlets config section (never traitlets' lazy placeholder), copied; else {}."""
    value = dict.get(section, key, {})
    return dict(value) if isinstance(value, dict) else {}


#: The contents manager of learners' servers under the hub: no notebook is trusted there (labkit.classroom.notary).
UNTRUSTING_CONTENTS_MANAGER = "labkit.classroom.notary.UntrustingContentsManager"
#: What ``Strict-Transport-Security`` the hub sends (its subdomains, the learners' servers, included).
HSTS = "max-age=31536000; includeSubDomains"


def origins_mode(subdomain_host: str | None) -> str:
    """One paragraph saying which origin mode a hub runs in and what that means (the hub prints it at start)."""
    if subdomain_host:
        return (
            f"labkit hub: per-user subdomains (LABKIT_SUBDOMAIN_HOST={subdomain_host}): each learner's server has its "
            "own origin, so nothing a learner's server sends can act as the hub in anyone's browser. Instructors "
            "are not hub admins and are refused (403) at a learner's server anyway."
        )
    return (
        "labkit hub: one origin (no LABKIT_SUBDOMAIN_HOST): every learner's server shares the hub's origin. What keeps "
        "a learner's page from acting as the hub: nobody but its owner may open a learner's server (instructors get "
        "403; nobody is a hub admin), notebooks are never trusted in learners' servers, learners' own configuration "
        "is ignored. Per-user subdomains are the recommended setup (course/classroom.md, 'Each learner on her own "
        "origin')."
    )


def _append_args(c: Any, args: list[str]) -> None:
    """Add ``args`` to the single-user servers' command line, in Spawner's section and any spawner's own."""
    c.Spawner.args = [*[a for a in _listed(c.Spawner, "args") if a not in args], *args]
    for name in ("KubeSpawner", "DockerSpawner"):
        if name in c and "args" in c[name]:
            c[name].args = [*[a for a in _listed(c[name], "args") if a not in args], *args]


def configure_origins(c: Any, *, subdomain_host: str | None = None, tls: bool = True, announce: bool = True) -> str:
    """Keep what a learner serves away from the hub's origin and the hub's cookies; returns (and with ``announce``
    prints to the hub's log) :func:`origins_mode`.

    ``subdomain_host`` (``LABKIT_SUBDOMAIN_HOST``, e.g. ``https://hub.school.edu``): every learner's server on its own
    origin, ``https://<name>.hub.school.edu/user/<name>/`` (JupyterHub's ``subdomain_host``; wildcard DNS and a
    wildcard certificate for ``*.hub.school.edu`` are the admin's part), with ``__Host-`` cookies: the recommended
    setup.

    Always, also on one origin without subdomains:

    - nobody opens another user's server: instructors hold no ``access:servers`` and nobody is a hub admin
      (:func:`configure_roles`, called by :func:`configure_login`);
    - no notebook is trusted in a learner's server (:data:`UNTRUSTING_CONTENTS_MANAGER`): a notebook the learner
      signed runs no script when opened;
    - ``Spawner.disable_user_config``: a learner's server ignores configuration, extensions and Python packages in
      the learner's home (``~/.jupyter``, ``~/.local``); ``PYTHONNOUSERSITE`` too;
    - files a server serves from the learner's folder keep jupyter_server's ``Content-Security-Policy: sandbox
      allow-scripts``;
    - the hub's login cookies are ``SameSite=Lax``, and with ``tls`` the hub sends :data:`HSTS`.
    """
    settings = _merged(c.JupyterHub, "tornado_settings")
    settings["cookie_options"] = {**settings.get("cookie_options", {}), "samesite": "Lax"}
    if tls:
        headers = dict(settings.get("headers", {}))
        headers.setdefault("Strict-Transport-Security", HSTS)
        settings["headers"] = headers
    c.JupyterHub.tornado_settings = settings
    if subdomain_host:
        if not subdomain_host.startswith(("https://", "http://")):
            raise HubSetupError(
                f"LABKIT_SUBDOMAIN_HOST={subdomain_host!r} must be a URL such as https://hub.school.edu "
                "(learners' servers are then at https://<name>.hub.school.edu)"
            )
        c.JupyterHub.subdomain_host = subdomain_host.rstrip("/")
        c.JupyterHub.cookie_host_prefix_enabled = subdomain_host.startswith("https://")
    c.Spawner.disable_user_config = True
    _append_args(c, [f"--ServerApp.contents_manager_class={UNTRUSTING_CONTENTS_MANAGER}"])
    env = _merged(c.Spawner, "environment")
    env["PYTHONNOUSERSITE"] = "1"
    c.Spawner.environment = env
    for name in ("KubeSpawner", "DockerSpawner"):  # a spawner's own section replaces Spawner's (Zero to JupyterHub)
        if name in c and "environment" in c[name]:
            c[name].environment = {**_merged(c[name], "environment"), "PYTHONNOUSERSITE": "1"}
    mode = origins_mode(subdomain_host)
    if announce:
        print(mode, file=sys.stderr, flush=True)
    return mode


#: Processes one learner's container or pod may run at once (a fork bomb stops there, not at the host's limit).
PIDS_LIMIT = 2048


def container_hardening(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Docker host-config settings for a learner's container (DockerSpawner's ``extra_host_config``, merged with the
    MIG device request): a process limit (``LABKIT_PIDS_LIMIT``, default :data:`PIDS_LIMIT`), every Linux capability
    dropped (the course image runs as the unprivileged ``learner``: Jupyter needs none), no new privileges (setuid
    programs gain nothing), Docker's default seccomp profile (never ``unconfined``), and with ``LABKIT_DISK_LIMIT``
    (e.g. ``20G``; needs overlay2 on xfs with project quotas) a limit on the container's writable layer."""
    env = os.environ if env is None else env
    hc: dict[str, Any] = {
        "pids_limit": int(env.get("LABKIT_PIDS_LIMIT", PIDS_LIMIT)),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
    }
    disk = env.get("LABKIT_DISK_LIMIT", "").strip()
    if disk:
        hc["storage_opt"] = {"size": disk}
    return hc


def check_docker_network(client: Any, name: str) -> None:
    """Refuse a learners' Docker network on which containers can reach each other: it must be a bridge made with
    ``com.docker.network.bridge.enable_icc=false`` (the host, and so the hub and the proxy, still reach each one)."""
    try:
        net = client.networks.get(name)
    except Exception as exc:  # noqa: BLE001 - docker.errors.NotFound and the like
        raise HubSetupError(
            f"the Docker network {name!r} does not exist: docker network create "
            f"-o com.docker.network.bridge.enable_icc=false {name}"
        ) from exc
    options = (net.attrs or {}).get("Options") or {}
    if str(options.get("com.docker.network.bridge.enable_icc", "true")).lower() != "false":
        raise HubSetupError(
            f"the Docker network {name!r} lets learners' containers connect to each other. Make it again with "
            f"inter-container traffic refused: docker network rm {name} && docker network create "
            f"-o com.docker.network.bridge.enable_icc=false {name} (or set LABKIT_ALLOW_ICC=1 to accept the risk)"
        )


#: Where a learner's home is mounted in her container, and the name of its Docker volume.
HOME_TARGET, HOME_VOLUME = "/home/learner", "labkit-home-{username}"


def home_mounts(size: str | None) -> list[dict[str, Any]]:
    """DockerSpawner ``mounts`` for a learner's home: the named volume ``labkit-home-<name>``, made by Docker's
    ``local`` driver with its ``size`` option (a project quota: /var/lib/docker on xfs mounted with ``pquota``), so
    one learner cannot fill the disk every learner's home and the images share. ``size`` off/0/empty: no limit."""
    mount: dict[str, Any] = {"type": "volume", "source": HOME_VOLUME, "target": HOME_TARGET}
    if size and size.strip().lower() not in ("off", "0"):
        mount["driver_config"] = {"Name": "local", "Options": {"size": size.strip()}}
    return [mount]


def check_home_quota(client: Any, size: str) -> None:
    """Make (and remove) a probe volume limited to ``size`` with Docker's ``local`` driver: a host whose Docker
    cannot limit a volume's size stops the hub here, with what to do, rather than at the first learner's start."""
    name = f"labkit-home-size-probe-{os.getpid()}"
    try:
        volume = client.volumes.create(name=name, driver="local", driver_opts={"size": size})
    except Exception as exc:  # noqa: BLE001 - docker.errors.APIError ("quota size requested but no quota support")
        raise HubSetupError(
            f"Docker cannot make a learner's home volume limited to {size} ({exc}). Its local driver limits a volume "
            "only when /var/lib/docker is on xfs mounted with project quotas (prjquota/pquota). Put Docker's data "
            "there, or set LABKIT_HOME_SIZE=off to accept homes without a limit."
        ) from None
    volume.remove(force=True)


def harden_kubespawner(c: Any, *, ephemeral_storage: str = "20Gi") -> None:
    """A learner's pod on Kubernetes: not root (``runAsNonRoot``), every capability dropped, no privilege
    escalation, the runtime's default seccomp profile, and a limit on the node disk it may fill
    (``ephemeral-storage``, added to every profile's limits, which would otherwise replace it)."""
    c.KubeSpawner.pod_security_context = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    c.KubeSpawner.container_security_context = {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    limits = {**_merged(c.KubeSpawner, "extra_resource_limits"), "ephemeral-storage": ephemeral_storage}
    c.KubeSpawner.extra_resource_limits = limits
    import copy

    profiles = copy.deepcopy(_listed(c.KubeSpawner, "profile_list"))  # never the values' own dicts
    for p in profiles:
        over = p.setdefault("kubespawner_override", {})
        if "extra_resource_limits" in over:
            over["extra_resource_limits"] = {**over["extra_resource_limits"], "ephemeral-storage": ephemeral_storage}
    if profiles:
        c.KubeSpawner.profile_list = profiles


def secure_state(folder: str | Path, files: Iterable[str] = ("jupyterhub.sqlite", "labkit-progress.sqlite")) -> Path:
    """The hub's state folder readable by its owner only: the folder 0700, the named ``files`` (the hub's database
    with every password hash, the progress database) 0600 where they exist, and this process's umask 0077, so files
    the hub and its services make from now on are the owner's only. Returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    os.umask(0o077)
    os.chmod(folder, 0o700)
    for name in files:
        p = folder / name
        if p.exists():
            os.chmod(p, 0o600)
    return folder


# ---------------------------------------------------------------------------------------------- `labkit hub`


def add_cli(sub: Any) -> None:
    """Register ``labkit hub`` on an argparse subparsers object."""
    sub.add_parser(
        "hub",
        help="say how this environment's classroom hub runs: its origin mode (LABKIT_SUBDOMAIN_HOST) and who may do what",
    )


def cli(env: Mapping[str, str] | None = None) -> int:
    """``labkit hub``: the origin mode the hub's configuration will use with this environment, what it means, and
    the roles (the same text the hub prints when it starts)."""
    env = os.environ if env is None else env
    subdomain_host = env.get("LABKIT_SUBDOMAIN_HOST", "").strip() or None
    print(origins_mode(subdomain_host))
    names = instructors_from(env)
    print(
        f"instructors ({', '.join(names) or 'none: set LABKIT_INSTRUCTORS'}): the teaching role ({', '.join(TEACHING_SCOPES)}) "
        "and the progress page; never access:servers. Nobody is a hub admin."
    )
    print("a learner's work, as files: python -m labkit.classroom.collect; grading: python -m labkit.classroom.grading (sudo)")
    return 0
