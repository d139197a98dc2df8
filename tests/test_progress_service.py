"""The labkit-progress service against a stand-in hub API (loopback only): jupyterhub's real HubAuth asks the
stand-in who a token belongs to and what scopes it has, exactly as it asks a real hub. About 1 s."""

from __future__ import annotations

import asyncio
import os
import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("jupyterhub")

from labkit import progress_service as ps  # noqa: E402

ACCESS = "access:services!service=labkit-progress"
TOKENS = {
    "tok-alice": {"kind": "user", "name": "alice", "scopes": [ACCESS, "users:activity!user=alice"]},
    "tok-bob": {"kind": "user", "name": "bob", "scopes": [ACCESS]},
    "tok-ingrid": {"kind": "user", "name": "ingrid", "scopes": [ACCESS, ps.INSTRUCTOR_SCOPE]},
    "tok-noscope": {"kind": "user", "name": "alice", "scopes": ["users:activity!user=alice"]},
    "tok-instructor-noaccess": {"kind": "user", "name": "ingrid", "scopes": [ps.INSTRUCTOR_SCOPE]},
}
EXERCISES = {"02.vector-add", "03.transpose"}


class FakeHubAPI(BaseHTTPRequestHandler):
    """``GET /hub/api/user``: the model of the token's owner, as JupyterHub's identify endpoint answers."""

    def do_GET(self) -> None:  # noqa: N802
        token = self.headers.get("Authorization", "").partition(" ")[2]
        model = TOKENS.get(token)
        if self.path != "/hub/api/user" or model is None:
            self.send_response(403)
            self.end_headers()
            return
        body = json.dumps(model).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def start_service(store: "ps.Store", hub_port: int, port: int = 0, refresh_s: float = ps.REFRESH_S):
    """The service's tornado app on a thread, asking the stand-in hub at ``hub_port``: (port, stop)."""
    from jupyterhub.services.auth import HubAuth
    from tornado.httpserver import HTTPServer

    auth = HubAuth(api_url=f"http://127.0.0.1:{hub_port}/hub/api", api_token="service-token",
                   access_scopes={ACCESS}, cache_max_age=0)
    started = threading.Event()
    state: dict = {}

    def serve() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        app = ps.make_app(store, prefix="/services/labkit-progress/", exercises=EXERCISES, stuck_minutes=10, hub_auth=auth,
                          refresh_s=refresh_s)
        server = HTTPServer(app)
        server.listen(port, "127.0.0.1")
        state["port"] = next(iter(server._sockets.values())).getsockname()[1]
        state["loop"] = loop
        state["app"] = app
        started.set()
        loop.run_forever()
        server.stop()  # as a process that ends: no listening socket, and the open connections closed
        loop.run_until_complete(server.close_all_connections())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(10)

    def stop() -> None:
        state["loop"].call_soon_threadsafe(state["loop"].stop)
        thread.join(10)

    return state["port"], stop, state["app"]


@pytest.fixture(scope="module")
def fake_hub():
    hub = ThreadingHTTPServer(("127.0.0.1", 0), FakeHubAPI)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    yield hub.server_port
    hub.shutdown()
    hub.server_close()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, fake_hub: int):
    store = ps.Store(tmp_path_factory.mktemp("svc") / "progress.sqlite")
    port, stop, _ = start_service(store, fake_hub)
    yield store, f"http://127.0.0.1:{port}/services/labkit-progress/"
    stop()


def call(url: str, token: str | None = None, body: bytes | dict | None = None) -> tuple[int, str]:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    headers = {"Authorization": f"token {token}"} if token else {}
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def rec(**kw) -> dict:
    base = {"v": 1, "exercise": "02.vector-add", "status": "failed", "time": "2026-12-01T09:00:00Z", "attempt": 1, "hints": 0}
    base.update(kw)
    return base


def test_learners_post_their_own_results(service) -> None:
    store, url = service
    before = store.count()
    assert call(url + "api/results", "tok-alice", rec())[0] == 201
    assert call(url + "api/results", "tok-alice", rec(status="passed", attempt=2, hints=1))[0] == 201
    assert call(url + "api/results", "tok-bob", rec(exercise="03.transpose"))[0] == 201
    assert store.count() == before + 3
    assert {r["user"] for r in store.rows()} >= {"alice", "bob"}


@pytest.mark.parametrize(
    "token, body, code",
    [
        ("tok-alice", rec(user="bob"), 403),                 # a forged user
        ("tok-noscope", rec(), 403),                          # a token without the service's scope
        ("tok-instructor-noaccess", rec(), 403),              # the instructor scope alone gives no access
        ("no-such-token", rec(), 403),                        # a token the hub does not know
        (None, rec(), 401),                                   # no token at all
        ("tok-alice", b"{not json", 400),                     # malformed JSON
        ("tok-alice", b"[1, 2]", 400),                        # JSON, not an object
        ("tok-alice", rec(exercise="02.no-such"), 422),       # an exercise this service does not know (yet)
        ("tok-alice", rec(status="great"), 400),
        ("tok-alice", rec(attempt=0), 400),
        ("tok-alice", rec(hints=-1), 400),
        ("tok-alice", rec(attempt=True), 400),
        ("tok-alice", rec(code="def kernel(): ..."), 400),    # code is never accepted
        ("tok-alice", rec(v=2), 400),
        ("tok-alice", b"x" * (ps.MAX_BODY + 1), 413),
    ],
)
def test_bad_input_is_refused_and_stores_nothing(service, token, body, code) -> None:
    store, url = service
    before = store.count()
    status, text = call(url + "api/results", token, body)
    assert status == code, text
    assert json.loads(text)["status"] == code
    assert store.count() == before


def test_learners_cannot_read_others(service) -> None:
    store, url = service
    call(url + "api/results", "tok-bob", rec(exercise="03.transpose", attempt=2))
    assert call(url + "api/summary", "tok-alice")[0] == 403
    assert call(url, "tok-alice")[0] == 403
    status, text = call(url + "api/mine", "tok-alice")
    assert status == 200
    mine = json.loads(text)
    assert mine["user"] == "alice" and mine["results"] and {r["user"] for r in mine["results"]} == {"alice"}
    assert call(url + "api/mine", "tok-noscope")[0] == 403


def test_instructor_sees_everyone(service) -> None:
    store, url = service
    call(url + "api/results", "tok-alice", rec(status="passed", attempt=3))
    call(url + "api/results", "tok-bob", rec(exercise="03.transpose", attempt=3))
    status, text = call(url + "api/summary", "tok-ingrid")
    assert status == 200
    data = json.loads(text)
    by_user = {lr["user"]: lr for lr in data["learners"]}
    assert by_user["alice"]["cells"]["02.vector-add"]["solved"] is True
    assert by_user["bob"]["cells"]["03.transpose"]["solved"] is False
    assert by_user["bob"]["cells"]["03.transpose"]["attempts"] >= 3
    status, page = call(url, "tok-ingrid")
    assert status == 200 and "alice" in page and "bob" in page and "setTimeout(refresh" in page and "reload()" in page and "api/summary" in page
    status, table = call(url + "api/summary?format=html", "tok-ingrid")
    assert status == 200 and table.startswith("<table>") and "bob" in table


def test_stuck_after_n_minutes(tmp_path: Path) -> None:
    store = ps.Store(tmp_path / "s.sqlite")
    t0 = time.time() - 30 * 60
    store.add("carol", {"exercise": "02.vector-add", "status": "failed", "attempt": 1, "hints": 0, "time": ""}, received=t0)
    store.add("carol", {"exercise": "02.vector-add", "status": "failed", "attempt": 5, "hints": 3, "time": ""}, received=t0 + 600)
    store.add("dan", {"exercise": "02.vector-add", "status": "failed", "attempt": 1, "hints": 0, "time": ""}, received=t0 + 27 * 60)
    store.add("erin", {"exercise": "02.vector-add", "status": "failed", "attempt": 1, "hints": 0, "time": ""}, received=t0)
    store.add("erin", {"exercise": "02.vector-add", "status": "passed", "attempt": 2, "hints": 0, "time": ""}, received=t0 + 60)
    data = ps.summary(store, EXERCISES, stuck_minutes=10, now=t0 + 30 * 60)
    cells = {lr["user"]: lr["cells"]["02.vector-add"] for lr in data["learners"]}
    assert cells["carol"]["stuck"] and cells["carol"]["stuck_minutes"] == 30 and cells["carol"]["hints"] == 3
    assert not cells["dan"]["stuck"]  # 3 minutes in
    assert cells["erin"]["solved"] and not cells["erin"]["stuck"]
    html = ps.render_table(data)
    assert 'class="stuck"' in html and 'class="solved"' in html and "stuck 30 min" in html
    assert data["exercises"] == ["02.vector-add"]


def test_names_are_escaped_in_the_page(tmp_path: Path) -> None:
    store = ps.Store(tmp_path / "s.sqlite")
    store.add("<script>x</script>", {"exercise": "02.vector-add", "status": "failed", "attempt": 1, "hints": 0, "time": ""})
    assert "<script>x" not in ps.render_table(ps.summary(store, EXERCISES))


def test_a_record_sent_twice_is_stored_once(service) -> None:
    store, url = service
    before = store.count()
    body = rec(exercise="03.transpose", attempt=41)
    assert call(url + "api/results", "tok-alice", body)[0] == 201
    status, text = call(url + "api/results", "tok-alice", body)
    assert status == 200 and json.loads(text)["duplicate"] is True
    assert call(url + "api/results", "tok-bob", body)[0] == 201  # another learner's attempt 41 is theirs
    assert store.count() == before + 2


def test_an_old_table_with_repeats_keeps_the_first_of_each(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE results (id INTEGER PRIMARY KEY, user TEXT NOT NULL, exercise TEXT NOT NULL, status TEXT NOT NULL, "
               "attempt INTEGER NOT NULL, hints INTEGER NOT NULL, client_time TEXT, received REAL NOT NULL)")
    for status in ("failed", "passed"):
        db.execute("INSERT INTO results (user, exercise, status, attempt, hints, client_time, received) VALUES "
                   "('carol', '02.vector-add', ?, 1, 0, '', 1.0)", (status,))
    db.commit()
    db.close()
    store = ps.Store(path)
    assert [r["status"] for r in store.rows()] == ["failed"]


def test_service_down_then_up_no_record_lost_none_twice(tmp_path: Path, fake_hub: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel checks while the service is down (its records stay in progress.jsonl), the service comes back on
    the same address, and the next check sends them all, each once; a record whose acknowledgement was lost is
    sent again and stored once."""
    import socket

    from labkit import progress

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "tok-alice")
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/alice/")
    monkeypatch.setenv("LABKIT_PROGRESS_URL", f"http://127.0.0.1:{port}/services/labkit-progress/")
    monkeypatch.delenv("LABKIT_PROGRESS", raising=False)
    progress._reset()
    try:
        for status in ("unsolved", "failed", "failed"):
            progress.record("02.vector-add", status)
            progress._NEXT_TRY = 0.0  # as if the backoff had passed: every check tries, and finds nobody
        assert len(progress.unsent()) == 3 and progress._DELAY > 0
        store = ps.Store(tmp_path / "progress.sqlite")
        _, stop, _ = start_service(store, fake_hub, port)
        try:
            progress._NEXT_TRY = 0.0
            progress.record("02.vector-add", "passed")
            assert [(r["attempt"], r["status"]) for r in store.rows()] == [(1, "unsolved"), (2, "failed"), (3, "failed"), (4, "passed")]
            assert progress.unsent() == []
            progress.sent_file().unlink()  # the acknowledgements lost: everything is sent again...
            assert progress.flush(force=True) == 4
            assert store.count() == 4  # ...and stored once
        finally:
            stop()
    finally:
        progress._reset()


def test_a_restarted_service_keeps_the_instructors_login(tmp_path: Path) -> None:
    """The cookie secret lives beside the database: the page an instructor left open still logs in after a restart."""
    store = ps.Store(tmp_path / "p.sqlite")
    first = ps.cookie_secret(store)
    assert ps.cookie_secret(ps.Store(tmp_path / "p.sqlite")) == first and len(first) == 32
    assert (tmp_path / "p.sqlite.cookie-secret").stat().st_mode & 0o077 == 0


def _chromium() -> str | None:
    import shutil

    return os.environ.get("LABKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="no Chromium installed (`apt-get install chromium`; CI's .ci/run installs it)")
@pytest.mark.timeout(60)
def test_the_open_page_says_it_lost_the_service_and_goes_on_after_a_restart(tmp_path: Path, fake_hub: int) -> None:
    """The instructor's page in a real (headless) Chromium: the service stops, the page says so instead of going
    quiet; the service comes back on the same address and the page shows what arrived meanwhile, by itself."""
    import socket

    from playwright.sync_api import sync_playwright

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = ps.Store(tmp_path / "p.sqlite")
    store.add("alice", {"exercise": "02.vector-add", "status": "passed", "attempt": 1, "hints": 0, "time": ""})
    url = f"http://127.0.0.1:{port}/services/labkit-progress/"
    _, stop, _ = start_service(store, fake_hub, port, refresh_s=0.25)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_context(extra_http_headers={"Authorization": "token tok-ingrid"}).new_page()
            page.goto(url)
            page.wait_for_function("document.getElementById('at').textContent.startsWith('Last update')", timeout=10_000)
            assert "alice" in page.inner_text("#table")
            stop()
            page.wait_for_selector("#lost", state="visible", timeout=10_000)
            assert "does not answer" in page.inner_text("#lost")
            store.add("bob", {"exercise": "03.transpose", "status": "failed", "attempt": 1, "hints": 0, "time": ""})
            _, stop, _ = start_service(store, fake_hub, port, refresh_s=0.25)
            page.wait_for_function("document.getElementById('table').textContent.includes('bob')", timeout=15_000)
            assert page.is_hidden("#lost")
        finally:
            browser.close()
            stop()


def test_a_late_record_counts_from_when_the_check_ran(tmp_path: Path) -> None:
    """A record sent 20 minutes late (the service was down) counts "stuck" from its own time; a record whose clock
    is far off (a day old, or in the future) counts from its arrival."""
    store = ps.Store(tmp_path / "s.sqlite")
    now = 1_800_000_000.0
    stamp = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
    store.add("carol", {"exercise": "02.vector-add", "status": "failed", "attempt": 1, "hints": 0, "time": stamp(now - 20 * 60)},
              received=now - 60)
    store.add("dan", {"exercise": "02.vector-add", "status": "failed", "attempt": 1, "hints": 0, "time": stamp(now - 86400)},
              received=now - 60)
    store.add("erin", {"exercise": "02.vector-add", "status": "failed", "attempt": 1, "hints": 0, "time": stamp(now + 3600)},
              received=now - 60)
    cells = {lr["user"]: lr["cells"]["02.vector-add"] for lr in ps.summary(store, EXERCISES, stuck_minutes=10, now=now)["learners"]}
    assert cells["carol"]["stuck"] and cells["carol"]["stuck_minutes"] == 20
    assert cells["dan"]["stuck_minutes"] == 1 and cells["erin"]["stuck_minutes"] == 1
