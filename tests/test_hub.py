"""A real JupyterHub 6 on localhost, as a classroom uses it (about 30 s on 2 cores; the budget is 90 s).

configurable-http-proxy from npm (``make test`` installs it in ``.venv/node``), the dummy authenticator, the
simple local-process spawner (every learner's server a process of this user, with its own home folder), and the
``labkit-progress`` service configured by the same :func:`labkit.progress_service.configure_hub` the DGX and
Kubernetes configurations use. Two learners and one instructor log in over the REST API; the learners' servers start;
each learner runs a check in a real kernel through the Jupyter server API (websocket, through the proxy); the
instructor's page shows both results; a learner asking for it is refused; everything is stopped at the end.
Every loop is bounded; every address is on the loopback interface.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

pytest.importorskip("jupyterhub")

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LEARNERS = ("alice", "bob")
INSTRUCTOR = "ingrid"
BUDGET_S = 90


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


def http(method: str, url: str, token: str | None = None, body: dict | None = None, timeout: float = 15) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"token {token}"
    data = json.dumps(body).encode() if body is not None else (b"" if method in ("POST", "DELETE") else None)
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


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


HUB_CONFIG = """
import os, sys
from labkit.progress_service import configure_hub

c = get_config()  # noqa: F821
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
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {users!r}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{tmp}/home/{{username}}"
c.Spawner.cmd = [{singleuser!r}]
c.Spawner.args = {spawner_args!r}
c.Spawner.start_timeout = 60
c.Spawner.http_timeout = 60
c.Spawner.environment = {{"LABKIT_MODE": "sim", "PYTHONUNBUFFERED": "1", "OPENBLAS_NUM_THREADS": "1"}}
c.Spawner.env_keep = ["PATH", "PYTHONPATH", "LANG", "LC_ALL", "VIRTUAL_ENV"]
configure_hub(c, public_url="http://127.0.0.1:{port}", service_url="http://127.0.0.1:{service_port}",
              db="{tmp}/progress.sqlite", instructors=[{instructor!r}], stuck_minutes=10)
"""


async def run_in_kernel(base: str, token: str, code: str, timeout: float = 60) -> tuple[str, str]:
    """Start a kernel on a learner's server, run ``code`` over the kernel websocket, return (stdout, reply status)."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    status, text = await asyncio.to_thread(http, "POST", f"{base}api/kernels", token, {"name": "python3"})
    assert status == 201, f"starting a kernel: {status} {text}"
    kernel = json.loads(text)["id"]
    ws_url = base.replace("http://", "ws://") + f"api/kernels/{kernel}/channels"
    conn = await asyncio.wait_for(websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {token}"})), 30)
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


CHECK_CODE = """
import labkit
from labkit.check import core
answer = core._get("08.mig").reference() if {solve} else {{"per_gpu": 56, "memory_gb": 80}}
result = labkit.check.run("08.mig", answer)
from labkit import progress
print("VERDICT", result.status, "IN_HUB", progress.in_hub(), "FILE", progress.progress_file().exists())
"""


def test_classroom_hub(tmp_path: Path) -> None:
    started = time.monotonic()
    deadline = started + BUDGET_S
    assert CHP is not None, "configurable-http-proxy is missing: make test installs it with npm into .venv/node"
    port, hub_port, proxy_api, service_port = (free_port() for _ in range(4))
    for user in (*LEARNERS, INSTRUCTOR):
        (tmp_path / "home" / user).mkdir(parents=True)
    args = ["--ServerApp.allow_root=True"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    config = tmp_path / "jupyterhub_config.py"
    config.write_text(HUB_CONFIG.format(
        port=port, hub_port=hub_port, proxy_api=proxy_api, service_port=service_port, tmp=tmp_path, chp=CHP,
        users={*LEARNERS, INSTRUCTOR}, singleuser=str(BIN / "jupyterhub-singleuser"), spawner_args=args, instructor=INSTRUCTOR,
    ))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "LABKIT_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    log = open(tmp_path / "hub.log", "w")
    hub = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(config)], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True)
    public = f"http://127.0.0.1:{port}"
    api = f"{public}/hub/api"
    tokens: dict[str, str] = {}
    timings: dict[str, float] = {}
    try:
        wait_for("the hub's API behind the proxy", lambda: http("GET", f"{api}/", timeout=2)[0] == 200, deadline)
        wait_for("the labkit-progress service", lambda: http("GET", f"{public}/services/labkit-progress/api/mine", timeout=2)[0] in (401, 403),
                 deadline)
        timings["hub up"] = time.monotonic() - started

        # log in over the REST API: the authenticator checks the credentials and the hub issues a token
        for user in (*LEARNERS, INSTRUCTOR):
            status, text = http("POST", f"{api}/users/{user}/tokens", body={"auth": {"username": user, "password": "any"},
                                                                            "note": "test login"})
            assert status in (200, 201), f"login of {user}: {status} {text}"
            tokens[user] = json.loads(text)["token"]
        assert http("POST", f"{api}/users/alice/tokens", body={"auth": {"username": "mallory", "password": "x"}})[0] == 403

        for user in LEARNERS:
            status, text = http("POST", f"{api}/users/{user}/server", tokens[user])
            assert status in (201, 202), f"starting {user}'s server: {status} {text}"

        def ready(user: str) -> bool:
            model = json.loads(http("GET", f"{api}/users/{user}", tokens[user])[1])
            server = (model.get("servers") or {}).get("")
            return bool(server and server.get("ready"))

        for user in LEARNERS:
            wait_for(f"{user}'s server", lambda user=user: ready(user), deadline, every=0.5)
        timings["servers up"] = time.monotonic() - started

        async def both() -> list[tuple[str, str]]:
            return await asyncio.gather(
                run_in_kernel(f"{public}/user/alice/", tokens["alice"], CHECK_CODE.format(solve=True)),
                run_in_kernel(f"{public}/user/bob/", tokens["bob"], CHECK_CODE.format(solve=False)),
            )

        (alice_out, alice_reply), (bob_out, bob_reply) = asyncio.run(both())
        timings["checks run"] = time.monotonic() - started
        assert alice_reply == "ok" and "VERDICT passed IN_HUB True FILE True" in alice_out, alice_out
        assert bob_reply == "ok" and "VERDICT failed IN_HUB True FILE True" in bob_out, bob_out
        assert (tmp_path / "home" / "alice" / ".local" / "share" / "labkit" / "progress.jsonl").exists()

        # the instructor's page shows both learners; the learners' requests for it are refused
        service = f"{public}/services/labkit-progress/"
        status, text = http("GET", f"{service}api/summary", tokens[INSTRUCTOR])
        assert status == 200, text
        cells = {lr["user"]: lr["cells"] for lr in json.loads(text)["learners"]}
        assert cells["alice"]["08.mig"]["solved"] is True and cells["alice"]["08.mig"]["attempts"] == 1
        assert cells["bob"]["08.mig"]["solved"] is False and cells["bob"]["08.mig"]["status"] == "failed"
        status, page = http("GET", service, tokens[INSTRUCTOR])
        assert status == 200 and "alice" in page and "bob" in page
        # a browser without a token is sent to the hub's OAuth login (the page is a HubOAuth client of the hub)
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        try:
            urllib.request.build_opener(NoRedirect).open(service, timeout=10)
            raise AssertionError("the instructor page answered without a login")
        except urllib.error.HTTPError as exc:
            assert exc.code == 302 and "/hub/api/oauth2/authorize" in exc.headers["Location"], (exc.code, exc.headers)
        for user in LEARNERS:
            assert http("GET", f"{service}api/summary", tokens[user])[0] == 403
            assert http("GET", service, tokens[user])[0] == 403
        # a learner's token cannot post for the other learner; the server token of alice's kernel posted for alice only
        status, _ = http("POST", f"{service}api/results", tokens["alice"],
                         {"v": 1, "exercise": "08.mig", "status": "passed", "time": "", "attempt": 9, "hints": 0, "user": "bob"})
        assert status == 403
        mine = json.loads(http("GET", f"{service}api/mine", tokens["bob"])[1])
        assert {r["user"] for r in mine["results"]} == {"bob"}

        # stop everything
        for user in LEARNERS:
            status, text = http("DELETE", f"{api}/users/{user}/server", tokens[user])
            assert status in (202, 204), f"stopping {user}'s server: {status} {text}"
        for user in LEARNERS:
            wait_for(f"{user}'s server to stop",
                     lambda user=user: not json.loads(http("GET", f"{api}/users/{user}", tokens[user])[1]).get("servers"), deadline)
        timings["servers stopped"] = time.monotonic() - started
    except BaseException:
        log.flush()
        print((tmp_path / "hub.log").read_text()[-6000:])
        raise
    finally:
        if hub.poll() is None:
            hub.send_signal(signal.SIGTERM)
            try:
                hub.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(hub.pid, signal.SIGKILL)
                hub.wait(10)
        log.close()
    timings["hub stopped"] = time.monotonic() - started
    elapsed = time.monotonic() - started
    print(f"hub test: {elapsed:.1f} s ({', '.join(f'{k} at {v:.1f} s' for k, v in timings.items())})")
    # nothing the hub started is left listening
    for p in (port, proxy_api, service_port, hub_port):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", p)) != 0, f"port {p} still listening after the hub stopped"
    assert elapsed < BUDGET_S, f"the hub test took {elapsed:.0f} s (budget {BUDGET_S} s)"
