"""A real JupyterHub 6 on localhost, as a classroom uses it (about 27 s on 2 idle cores; the budget is 90 s).

configurable-http-proxy from npm (``make test`` installs it in ``.venv/node``) serving HTTPS with a self-signed
certificate made for 127.0.0.1; the course's own logins (NativeAuthenticator through :func:`labkit.hub_setup.
configure_login`: the instructor's account made by the configuration, learners signing up and approved by the
instructor); the simple local-process spawner (every learner's server a process of this user, with its own home
folder) taking fake MIG slices from the DGX's allocator (``deploy/jupyterhub/mig_allocator.py``); the
``labkit-progress`` service configured by the same :func:`labkit.progress_service.configure_hub` the DGX and
Kubernetes configurations use; and ``jupyterhub-idle-culler`` with the role :func:`labkit.hub_setup.configure_culler`
gives it.

What it shows: a learner cannot log in before approval, nor as another learner, nor sign up as the instructor; each
learner runs a check in a real kernel through the Jupyter server API (websocket, through the HTTPS proxy), and a
record left unsent by an earlier kernel is sent when the kernel starts (the image's IPython startup file); the
instructor logs in through the login form like a browser and sees the live page; learners cannot read it, nor each
other's results; the culler stops the idle servers and their slices are freed. Every loop is bounded; every address
is on the loopback interface.
"""

from __future__ import annotations

import asyncio
from http.cookiejar import CookieJar
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

pytest.importorskip("jupyterhub")
pytest.importorskip("nativeauthenticator")
pytest.importorskip("jupyterhub_idle_culler")

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LEARNERS = ("alice", "bob")
INSTRUCTOR = "ingrid"
PASSWORDS = {"alice": "alice-learns-cuda", "bob": "bob-writes-kernels", INSTRUCTOR: "ingrid-teaches-gpus"}
BUDGET_S = 90
SIGNUP_CODE = "gpu-class-2026"  # the class's sign-up code (review 4, R4-6)


def find_chp() -> str | None:
    """configurable-http-proxy: the one ``make test`` installs under .venv/node, else one on PATH."""
    local = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
    if local.exists():
        return str(local)
    return shutil.which("configurable-http-proxy")


CHP = find_chp()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(CHP is None and not os.environ.get("CI"),
                       reason="configurable-http-proxy is not installed (make test installs it from npm)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TLS: ssl.SSLContext | None = None  # trusts the test's self-signed certificate (set by the test)


def http(method: str, url: str, token: str | None = None, body: dict | None = None, timeout: float = 15) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"token {token}"
    data = json.dumps(body).encode() if body is not None else (b"" if method in ("POST", "DELETE") else None)
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=TLS if url.startswith("https:") else None) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Browser:
    """Cookies and forms, as a browser uses the hub (the login and sign-up pages, the service's OAuth round trip)."""

    def __init__(self) -> None:
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar),
                                                  urllib.request.HTTPSHandler(context=TLS))

    def get(self, url: str) -> tuple[int, str, str]:
        """(status, body, final URL) after following redirects."""
        try:
            with self.opener.open(url, timeout=15) as resp:
                return resp.status, resp.read().decode(), resp.url
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), exc.url

    def form(self, url: str, fields: dict[str, str]) -> tuple[int, str, str]:
        """Open the form's page (for its _xsrf token), then post it."""
        status, page, _ = self.get(url)
        assert status == 200, (url, status, page[:300])
        m = re.search(r'name="_xsrf"\s+value="([^"]+)"', page) or re.search(r'value="([^"]+)"\s+name="_xsrf"', page)
        data = dict(fields, _xsrf=m.group(1)) if m else dict(fields)
        req = urllib.request.Request(url, data=urllib.parse.urlencode(data).encode(), method="POST")
        try:
            with self.opener.open(req, timeout=15) as resp:
                return resp.status, resp.read().decode(), resp.url
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), exc.url


def wait_for(what: str, probe, deadline: float, every: float = 0.25):
    """Call ``probe`` until it returns something truthy or the deadline passes (then fail, naming ``what``)."""
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except OSError as exc:  # not listening yet
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def stop_hub_process(hub: subprocess.Popen, log: Path, limit_s: float = 20) -> None:
    """SIGTERM to the hub; once its log says its cleanup is done (servers, services and proxy stopped, PID file
    removed: JupyterHub's last line, ``...done``), end the process rather than wait out its interpreter's teardown (a
    few seconds of garbage collection on a loaded machine). A hub that does not get that far in ``limit_s`` is killed
    with its process group, as before."""
    if hub.poll() is not None:
        return
    hub.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + limit_s
    while hub.poll() is None and time.monotonic() < deadline:
        if re.search(r"JupyterHub app:\d+\] \.\.\.done$", log.read_text(errors="replace"), flags=re.MULTILINE):
            try:
                hub.wait(0.5)
            except subprocess.TimeoutExpired:
                hub.kill()
            break
        time.sleep(0.1)
    if hub.poll() is None and time.monotonic() >= deadline:
        os.killpg(hub.pid, signal.SIGKILL)
    hub.wait(10)


HUB_CONFIG = """
import os, sys
sys.path.insert(0, {deploy!r})
from mig_allocator import SliceAllocator
from labkit.hub_setup import configure_culler, configure_login, configure_origins, configure_tls
from labkit.progress_service import configure_hub

c = get_config()  # noqa: F821
# The hub polls a starting server (and the proxy, and the service), and a stopping server's process, with a random
# back-off of up to 5 s between tries: a server that came up (or ended) just after a try waited up to 5 s more to be
# seen. Here the tries come at most 0.5 s apart (jupyterhub.utils' wait_for_http_server and wait_for_server, the
# spawner's wait_for_death); the hub still waits for each server to answer or end, and nothing else changes.
import functools as _functools
import jupyterhub.spawner as _hub_spawner
import jupyterhub.utils as _hub_utils
_hub_utils.exponential_backoff = _hub_spawner.exponential_backoff = _functools.partial(
    _hub_utils.exponential_backoff, max_wait=0.5)
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{tmp}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{tmp}/cookie_secret"
c.JupyterHub.pid_file = "{tmp}/hub.pid"
c.JupyterHub.cleanup_servers = True
c.JupyterHub.tornado_settings = {{"slow_spawn_timeout": 0, "slow_stop_timeout": 0}}  # answer at once: servers start and stop side by side
c.JupyterHub.cleanup_proxy = True
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.ConfigurableHTTPProxy.should_start = True
configure_tls(c, cert={cert!r}, key={key!r})
configure_login(c, login="native", instructors=[{instructor!r}], env={{"LABKIT_ADMIN_PASSWORD": {admin_password!r},
                                                                    "LABKIT_SIGNUP_CODE": {signup_code!r}}})
# no step here measures time: bcrypt at its least cost (test_redteam_hub's flood test and test_redteam_auth's timing
# tests keep the real one, 12)
c.CourseNativeAuthenticator.bcrypt_rounds = 4
configure_origins(c, tls=True)  # no user config in learners' servers, SameSite cookies, HSTS (as the DGX)
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{tmp}/home/{{username}}"
c.Spawner.cmd = {singleuser!r}
c.Spawner.args = [*c.Spawner.args, *{spawner_args!r}]  # after configure_origins' own
c.Spawner.start_timeout = 60
c.Spawner.http_timeout = 60
c.Spawner.environment = {{"LABKIT_MODE": "sim", "PYTHONUNBUFFERED": "1", "OPENBLAS_NUM_THREADS": "1",
                          "IPYTHONDIR": "{tmp}/ipython"}}
c.Spawner.env_keep = ["PATH", "PYTHONPATH", "LANG", "LC_ALL", "VIRTUAL_ENV"]
# the DGX's allocator with 7 stand-in slices: taken before a server starts, freed when it stops
allocator = SliceAllocator([f"MIG-test-{{i}}" for i in range(7)], state_file="{tmp}/mig-slices.json")

async def _take(spawner):
    await allocator.pre_spawn_hook(spawner, instructors=[{instructor!r}], wait_s=10)

def _free(spawner):
    allocator.post_stop_hook(spawner)

c.Spawner.pre_spawn_hook = _take
c.Spawner.post_stop_hook = _free
configure_hub(c, public_url="https://127.0.0.1:{port}", service_url="http://127.0.0.1:{service_port}",
              progress_url="http://127.0.0.1:{service_port}/services/labkit-progress/",
              db="{tmp}/progress.sqlite", instructors=[{instructor!r}], stuck_minutes=10)
configure_culler(c, idle_minutes=60, managed=False, api_token={culler_token!r})  # the test runs the culler itself
"""


async def run_in_kernel(base: str, token: str, code: str, timeout: float = 60) -> tuple[str, str]:
    """Start a kernel on a learner's server, run ``code`` over the kernel websocket, return (stdout, reply status)."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    status, text = await asyncio.to_thread(http, "POST", f"{base}api/kernels", token, {"name": "python3"})
    assert status == 201, f"starting a kernel: {status} {text}"
    kernel = json.loads(text)["id"]
    ws_url = base.replace("https://", "wss://") + f"api/kernels/{kernel}/channels"
    conn = await asyncio.wait_for(websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {token}"},
                                                                ca_certs=CA_FILE)), 30)
    msg_id = uuid.uuid4().hex
    conn.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": uuid.uuid4().hex,
                   "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False,
                    "stop_on_error": True},
    }))
    out, reply, idle = [], None, False
    deadline = time.monotonic() + timeout
    while (reply is None or not idle) and time.monotonic() < deadline:
        raw = await asyncio.wait_for(conn.read_message(), max(0.1, deadline - time.monotonic()))
        assert raw is not None, "the kernel websocket closed"
        msg = json.loads(raw)
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind = msg["header"]["msg_type"]
        if kind == "stream":
            out.append(msg["content"]["text"])
        elif kind == "error":
            out.append("\n".join(msg["content"]["traceback"]))
        elif kind == "execute_reply":
            reply = msg["content"]["status"]
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            idle = True
    conn.close()
    await asyncio.to_thread(http, "DELETE", f"{base}api/kernels/{kernel}", token)
    assert reply is not None, f"no execute_reply in {timeout} s; output so far: {''.join(out)}"
    return "".join(out), reply


CA_FILE: str | None = None  # the self-signed certificate, for the kernel websocket

CHECK_CODE = """
import labkit
from labkit.check import core
answer = core._get("08.mig").reference() if {solve} else {{"per_gpu": 56, "memory_gb": 80}}
result = labkit.check.run("08.mig", answer)
from labkit import progress
print("VERDICT", result.status, "IN_HUB", progress.in_hub(), "FILE", progress.progress_file().exists())
"""


def test_classroom_hub(tmp_path: Path) -> None:
    """The classroom on this environment's JupyterHub (6); tests/test_hub5.py runs it on the chart's JupyterHub 5."""
    version = run_classroom(tmp_path, sys.executable)
    assert version.split(".")[0] == "6", version


def run_classroom(tmp_path: Path, python: str) -> str:
    """The whole classroom with the hub, the servers, the service and the culler on ``python``; returns the hub's
    JupyterHub version (as its API says)."""
    global TLS, CA_FILE
    from labkit.hub_setup import culler_command, make_self_signed

    started = time.monotonic()
    deadline = started + BUDGET_S
    assert CHP is not None, "configurable-http-proxy is missing: make test installs it with npm into .venv/node"
    port, hub_port, proxy_api, service_port = (free_port() for _ in range(4))
    cert, key = make_self_signed(tmp_path / "tls", ["127.0.0.1", "localhost"])
    TLS, CA_FILE = ssl.create_default_context(cafile=str(cert)), str(cert)
    for user in (*LEARNERS, INSTRUCTOR):
        (tmp_path / "home" / user).mkdir(parents=True)
    (tmp_path / "home" / "alice" / "work.txt").write_text("alice's work")
    # the image's IPython startup file, in the servers' IPYTHONDIR
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "ipython" / "00-labkit-progress.py", startup)
    # a record an earlier kernel of alice's could not send (the service was down): the next kernel start sends it
    left = tmp_path / "home" / "alice" / ".local" / "share" / "labkit" / "progress.jsonl"
    left.parent.mkdir(parents=True)
    left.write_text(json.dumps({"v": 1, "exercise": "00.vector-add", "status": "failed", "time": "2026-12-01T09:00:00Z",
                                "attempt": 1, "hints": 0}) + "\n")
    culler_token = uuid.uuid4().hex
    args = ["--ServerApp.allow_root=True"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    config = tmp_path / "jupyterhub_config.py"
    config.write_text(HUB_CONFIG.format(
        port=port, hub_port=hub_port, proxy_api=proxy_api, service_port=service_port, tmp=tmp_path, chp=CHP,
        singleuser=[python, "-m", "jupyterhub.singleuser"], spawner_args=args, instructor=INSTRUCTOR,
        deploy=str(ROOT / "deploy" / "jupyterhub"), cert=str(cert), key=str(key), admin_password=PASSWORDS[INSTRUCTOR], signup_code=SIGNUP_CODE,
        culler_token=culler_token,
    ))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "LABKIT_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    log = open(tmp_path / "hub.log", "w")
    # `python -m`: the hub and the servers run on that interpreter's JupyterHub (6 in .venv, 5 in .venv-hub5)
    hub = subprocess.Popen([python, "-m", "jupyterhub", "-f", str(config)], cwd=tmp_path, env=env, stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True)
    public = f"https://127.0.0.1:{port}"
    api = f"{public}/hub/api"
    service = f"{public}/services/labkit-progress/"
    tokens: dict[str, str] = {}
    timings: dict[str, float] = {}
    culler = None

    def login(user: str, password: str) -> tuple[int, str]:
        """A login over the REST API: the authenticator checks the credentials and the hub issues a token."""
        return http("POST", f"{api}/users/{user}/tokens", body={"auth": {"username": user, "password": password}, "note": "test login"})

    try:
        wait_for("the hub's API behind the HTTPS proxy", lambda: http("GET", f"{api}/", timeout=2)[0] == 200, deadline)
        version = json.loads(http("GET", f"{api}/")[1])["version"]
        wait_for("the labkit-progress service", lambda: http("GET", f"{service}api/mine", timeout=2)[0] in (401, 403), deadline)
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):  # really TLS, really this certificate
            urllib.request.urlopen(f"{api}/", timeout=5, context=ssl.create_default_context())
        timings["hub up"] = time.monotonic() - started

        # learners sign up; nobody can sign up as the instructor, whose account the configuration made
        browsers = {user: Browser() for user in (*LEARNERS, INSTRUCTOR, "mallory")}
        # the form asks for the class's code; a sign-up without it is refused and stores nothing
        status, page, _ = browsers["mallory"].form(f"{public}/hub/signup", {
            "username": "outsider", "signup_password": "outsider-pass-123", "signup_password_confirmation": "outsider-pass-123"})
        assert status == 400 and "sign-up code" in page and 'name="class_code"' in page, (status, page[-500:])
        for user in LEARNERS:  # alice types the code; bob follows the link that carries it
            url, fields = f"{public}/hub/signup", {"class_code": SIGNUP_CODE}
            if user == "bob":
                url, fields = f"{public}/hub/signup?code={SIGNUP_CODE}", {}
            status, page, _ = browsers[user].form(url, {
                **fields, "username": user, "signup_password": PASSWORDS[user], "signup_password_confirmation": PASSWORDS[user]})
            assert status == 200 and "sent to the admin" in page, page[-800:]
        browsers["mallory"].form(f"{public}/hub/signup", {"username": INSTRUCTOR, "signup_password": "mallory-wants-admin",
                                                          "signup_password_confirmation": "mallory-wants-admin",
                                                          "class_code": SIGNUP_CODE})
        assert login(INSTRUCTOR, "mallory-wants-admin")[0] == 403
        assert login("alice", PASSWORDS["alice"])[0] == 403  # not approved yet

        # the instructor logs in through the form, as in a browser, and approves both learners; she comes by the hub's
        # home page (next=/hub/home): a login to /hub/ would start a server of hers, which no step here uses
        status, page, url = browsers[INSTRUCTOR].form(f"{public}/hub/login?next=%2Fhub%2Fhome",
                                                      {"username": INSTRUCTOR, "password": PASSWORDS[INSTRUCTOR]})
        assert status == 200 and "/hub/login" not in url, (status, url, page[-500:])
        for user in LEARNERS:  # approval is a POST form with the XSRF token (a GET only shows the form)
            status, page, _ = browsers[INSTRUCTOR].get(f"{public}/hub/authorize/{user}")
            assert status == 200 and "method='post'" in page, page[-500:]
            assert login(user, PASSWORDS[user])[0] == 403  # the GET approved nobody
            status, page, _ = browsers[INSTRUCTOR].form(f"{public}/hub/authorize/{user}", {})
            assert status == 200, page[-500:]
        status, _, _ = browsers["alice"].get(f"{public}/hub/authorize/bob")  # a learner cannot approve anyone
        assert status in (403, 404) or "/hub/login" in _
        for user in LEARNERS:  # the login form, as in a browser (the hub makes its user at the first login)
            status, page, url = browsers[user].form(f"{public}/hub/login", {"username": user, "password": PASSWORDS[user]})
            assert status == 200 and "/hub/login" not in url, (user, status, url, page[-500:])
        status, page, url = Browser().form(f"{public}/hub/login", {"username": "alice", "password": PASSWORDS["bob"]})
        assert "/hub/login" in url and "Invalid username or password" in page
        for user in (*LEARNERS, INSTRUCTOR):
            status, text = login(user, PASSWORDS[user])
            assert status in (200, 201), f"login of {user}: {status} {text}"
            tokens[user] = json.loads(text)["token"]
        # nobody logs in as someone else: not with their own password, not with a made-up name
        assert login("alice", PASSWORDS["bob"])[0] == 403
        assert login("bob", PASSWORDS["alice"])[0] == 403
        assert login("mallory", "x" * 12)[0] == 403
        assert http("POST", f"{api}/users/alice/tokens", tokens["bob"], {"note": "bob's token for alice"})[0] == 403
        timings["logins"] = time.monotonic() - started

        for user in LEARNERS:
            # the form login above may already have started it (the hub sends a learner who logs in to /hub/spawn):
            # then the hub answers 400 "already running" or "pending", and the server is on its way all the same
            status, text = http("POST", f"{api}/users/{user}/server", tokens[user])
            started_by_login = status == 400 and ("already running" in text or "pending" in text)
            assert status in (201, 202) or started_by_login, f"starting {user}'s server: {status} {text}"

        def ready(user: str) -> bool:
            model = json.loads(http("GET", f"{api}/users/{user}", tokens[user])[1])
            server = (model.get("servers") or {}).get("")
            return bool(server and server.get("ready"))

        for user in LEARNERS:
            wait_for(f"{user}'s server", lambda user=user: ready(user), deadline, every=0.2)
        timings["servers up"] = time.monotonic() - started
        held = json.loads((tmp_path / "mig-slices.json").read_text())["held"]
        assert set(held) == set(LEARNERS) and len(set(held.values())) == 2  # one slice each, never the same

        async def both() -> list[tuple[str, str]]:
            return await asyncio.gather(
                run_in_kernel(f"{public}/user/alice/", tokens["alice"], CHECK_CODE.format(solve=True)),
                run_in_kernel(f"{public}/user/bob/", tokens["bob"], CHECK_CODE.format(solve=False)),
            )

        (alice_out, alice_reply), (bob_out, bob_reply) = asyncio.run(both())
        timings["checks run"] = time.monotonic() - started
        assert alice_reply == "ok" and "VERDICT passed IN_HUB True FILE True" in alice_out, alice_out
        assert bob_reply == "ok" and "VERDICT failed IN_HUB True FILE True" in bob_out, bob_out

        # the instructor's live page, in the browser that logged in (the service's OAuth round trip through the hub)
        status, page, url = browsers[INSTRUCTOR].get(service)
        assert status == 200 and url.rstrip("/") == service.rstrip("/"), (status, url)
        assert "alice" in page and "bob" in page and "setTimeout(refresh" in page
        status, table, _ = browsers[INSTRUCTOR].get(f"{service}api/summary?format=html")  # what the page fetches
        assert status == 200 and table.startswith("<table>")
        status, text = http("GET", f"{service}api/summary", tokens[INSTRUCTOR])
        assert status == 200, text
        cells = {lr["user"]: lr["cells"] for lr in json.loads(text)["learners"]}
        assert cells["alice"]["08.mig"]["solved"] is True and cells["alice"]["08.mig"]["attempts"] == 1
        assert cells["alice"]["00.vector-add"]["status"] == "failed"  # sent at the kernel's start
        assert cells["bob"]["08.mig"]["solved"] is False and cells["bob"]["08.mig"]["status"] == "failed"
        # least privilege (review 4, R4-1): nobody is a hub admin; the instructor has the admin page and approvals
        # but the hub refuses her at a learner's server: the browser's OAuth round trip, the authorize endpoint
        # itself, her token on the server's API; she cannot mint a token for a learner nor make herself an admin
        users = json.loads(http("GET", f"{api}/users", tokens[INSTRUCTOR])[1])
        assert {u["name"] for u in users} >= {*LEARNERS, INSTRUCTOR} and not any(u["admin"] for u in users), users
        assert browsers[INSTRUCTOR].get(f"{public}/hub/admin")[0] == 200
        assert browsers[INSTRUCTOR].get(f"{public}/hub/authorize")[0] == 200
        status, page, url = browsers[INSTRUCTOR].get(f"{public}/user/alice/files/work.txt")  # (no JupyterLab in .venv-hub5)
        assert status == 403 and "/hub/api/oauth2/authorize" in url, (status, url, page[-300:])
        authorize = f"{public}/hub/api/oauth2/authorize?" + urllib.parse.urlencode({
            "client_id": "jupyterhub-user-alice", "redirect_uri": "/user/alice/oauth_callback", "response_type": "code",
            "state": "x"})
        assert browsers[INSTRUCTOR].get(authorize)[0] == 403
        assert http("GET", f"{public}/user/alice/api/contents", tokens[INSTRUCTOR])[0] == 403
        assert http("POST", f"{api}/users/alice/tokens", tokens[INSTRUCTOR], {"note": "as alice"})[0] == 403
        assert http("PATCH", f"{api}/users/{INSTRUCTOR}", tokens[INSTRUCTOR], {"admin": True})[0] == 403
        status, page, url = browsers["alice"].get(f"{public}/user/alice/files/work.txt")  # the control: her own, 200
        assert status == 200 and page == "alice's work" and url.startswith(f"{public}/user/alice/"), (status, url)
        # learners' tokens have a lifetime (R4-10): a token minted without one gets the hub's maximum
        model = json.loads(http("GET", f"{api}/users/alice/tokens", tokens["alice"])[1])
        minted = [t for t in model["api_tokens"] if t.get("note") == "test login"]  # not her server's own token
        assert minted and all(t["expires_at"] for t in minted), model
        timings["least privilege"] = time.monotonic() - started

        # a browser without a login is sent to the hub's OAuth login (the page is a HubOAuth client of the hub)
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        try:
            urllib.request.build_opener(NoRedirect, urllib.request.HTTPSHandler(context=TLS)).open(service, timeout=10)
            raise AssertionError("the instructor page answered without a login")
        except urllib.error.HTTPError as exc:
            assert exc.code == 302 and "/hub/api/oauth2/authorize" in exc.headers["Location"], (exc.code, exc.headers)
        # learners: not the page (in their browser either), not the summary, not another's results
        assert browsers["alice"].get(service)[0] == 403
        for user in LEARNERS:
            assert http("GET", f"{service}api/summary", tokens[user])[0] == 403
            assert http("GET", service, tokens[user])[0] == 403
        status, _ = http("POST", f"{service}api/results", tokens["alice"],
                         {"v": 1, "exercise": "08.mig", "status": "passed", "time": "", "attempt": 9, "hints": 0, "user": "bob"})
        assert status == 403
        mine = json.loads(http("GET", f"{service}api/mine", tokens["bob"])[1])
        assert {r["user"] for r in mine["results"]} == {"bob"}
        assert http("GET", f"{api}/users/alice", tokens["bob"])[0] == 404  # the hub hides other users from a learner

        # both servers are idle now: the culler (as the DGX runs it, with its role) stops them and frees their slices
        culler_env = dict(env, JUPYTERHUB_API_TOKEN=culler_token)
        culler = subprocess.Popen(culler_command(1, every_s=1, hub_api_url=f"http://127.0.0.1:{hub_port}/hub/api", python=python), env=culler_env,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        for user in LEARNERS:
            wait_for(f"the culler to stop {user}'s server",
                     lambda user=user: not json.loads(http("GET", f"{api}/users/{user}", tokens[user])[1]).get("servers"), deadline)
        assert json.loads((tmp_path / "mig-slices.json").read_text())["held"] == {}
        timings["servers culled"] = time.monotonic() - started
    except BaseException:
        log.flush()
        print((tmp_path / "hub.log").read_text()[-6000:])
        raise
    finally:
        if culler is not None and culler.poll() is None:
            culler.send_signal(signal.SIGTERM)
            try:
                culler.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(culler.pid, signal.SIGKILL)
                culler.wait(10)
        timings["culler ended"] = time.monotonic() - started
        log.flush()
        stop_hub_process(hub, tmp_path / "hub.log")
        timings["hub ended"] = time.monotonic() - started
        log.close()
    timings["hub stopped"] = time.monotonic() - started
    elapsed = time.monotonic() - started
    print(f"hub test (JupyterHub {version}): {elapsed:.1f} s ({', '.join(f'{k} at {v:.1f} s' for k, v in timings.items())})")
    # nothing the hub started is left listening
    for p in (port, proxy_api, service_port, hub_port):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", p)) != 0, f"port {p} still listening after the hub stopped"
    assert elapsed < BUDGET_S, f"the hub test took {elapsed:.0f} s (budget {BUDGET_S} s)"
    return version
