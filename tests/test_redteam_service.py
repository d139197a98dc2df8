"""Red team, round 3 (shared/reviews/classroom-review-3.md), the progress service and the gradebook, on loopback
against the stand-in hub API of test_progress_service (real HubAuth, real tornado, the service's own ``listen``).

Each test replays one finding and fails if the attack still works: #6 (a forged "passed" graded), #9 (anonymous
100 MB bodies buffered), #12 (one learner's flood of records), #13 (the database world-readable), #17 (deep JSON
answering 500), #19 (records for an exercise the service does not know yet dropped for good). The load tests measure
another learner's response time while the attack runs, bounded in count and time."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer

import pytest

pytest.importorskip("jupyterhub")

from labkit import gradebook, progress  # noqa: E402
from labkit import progress_service as ps  # noqa: E402
from test_progress_service import EXERCISES, FakeHubAPI, call, rec  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def start(store, hub_port, **kw):
    """The service's app served by :func:`labkit.progress_service.listen` (as ``main`` serves it) on a thread."""
    from jupyterhub.services.auth import HubAuth

    auth = HubAuth(api_url=f"http://127.0.0.1:{hub_port}/hub/api", api_token="service-token",
                   access_scopes={"access:services!service=labkit-progress"}, cache_max_age=0)
    ready, state = threading.Event(), {}

    def serve():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        app = ps.make_app(store, prefix="/services/labkit-progress/", exercises=EXERCISES, hub_auth=auth, **kw)
        server = ps.listen(app, 0, "127.0.0.1")
        state.update(port=next(iter(server._sockets.values())).getsockname()[1], loop=loop)
        ready.set()
        loop.run_forever()
        server.stop()
        loop.run_until_complete(server.close_all_connections())
        loop.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    assert ready.wait(10)

    def stop():
        state["loop"].call_soon_threadsafe(state["loop"].stop)
        t.join(10)

    return state["port"], stop


@pytest.fixture
def svc(tmp_path):
    hub = ThreadingHTTPServer(("127.0.0.1", 0), FakeHubAPI)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    store = ps.Store(tmp_path / "progress.sqlite")
    port, stop = start(store, hub.server_port, records_per_minute=30)
    yield store, port, f"http://127.0.0.1:{port}/services/labkit-progress/"
    stop()
    hub.shutdown()
    hub.server_close()


def latency(url, token, n=10):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        status, _ = call(url + "api/mine", token)
        out.append(time.perf_counter() - t)
        assert status == 200
    return out


# ---------------------------------------------------------------------------------------------- #9


def big_post(port, size, send=1 << 16):
    """An anonymous POST announcing ``size`` bytes; sends at most ``send`` of them, then reads the answer.
    Returns (seconds until the service answered or closed, the first line it answered or '')."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    t = time.perf_counter()
    try:
        s.sendall(f"POST /services/labkit-progress/api/results HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n"
                  "Content-Type: application/json\r\n\r\n".encode())
        try:
            s.sendall(b"[" * send)
        except OSError:
            pass
        try:
            first = s.recv(200).decode(errors="replace").split("\r\n")[0]
        except (socket.timeout, OSError):
            first = "(no answer)" if time.perf_counter() - t >= 4.9 else ""
    finally:
        s.close()
    return time.perf_counter() - t, first


def test_anonymous_huge_bodies_are_refused_before_they_are_read(svc):
    """#9: a 90 MB anonymous body was read whole before the token check (6 at once: 668 MB, a learner's request
    1.5 s). Now the service answers by the Content-Length at once, having read almost nothing; the service was
    waiting for the body before (this test's read then times out: '(no answer)')."""
    store, port, url = svc
    elapsed, first = big_post(port, 90 * 2**20)
    assert first != "(no answer)" and elapsed < 2, (elapsed, first)
    with ThreadPoolExecutor(6) as pool:
        floods = [pool.submit(big_post, port, 90 * 2**20) for _ in range(6)]
        lat = latency(url, "tok-bob", 10)
        results = [f.result() for f in floods]
    assert all(r[1] != "(no answer)" for r in results), results
    print(f"6 anonymous 90 MB posts refused in max {max(r[0] for r in results) * 1000:.0f} ms; "
          f"bob's api/mine meanwhile: median {statistics.median(lat) * 1000:.1f} ms, max {max(lat) * 1000:.1f} ms")
    assert max(lat) < 0.5


# ---------------------------------------------------------------------------------------------- #17


def test_deeply_nested_json_is_a_400_not_a_500(svc):
    _, _, url = svc
    for body in (b"[" * 3000, b'{"a":' * 1000 + b"1" + b"}" * 1000):
        status, text = call(url + "api/results", "tok-alice", body)
        assert status == 400, (status, text)


# ---------------------------------------------------------------------------------------------- #12


def test_one_learners_flood_is_rate_limited_and_others_stay_fast(svc):
    """#12: one learner posted 52 records/s without limit (6.5 M rows possible). Now 30 a minute (this service's
    setting; 60 by default) then 429 with Retry-After; bob's requests stay fast meanwhile; nothing past the limit
    is stored."""
    store, _, url = svc
    codes = []

    def flood():
        for i in range(1, 121):
            codes.append(call(url + "api/results", "tok-alice", rec(attempt=i))[0])

    t = threading.Thread(target=flood)
    t.start()
    lat = latency(url, "tok-bob", 15)
    t.join(60)
    assert codes.count(201) <= 31 and codes.count(429) >= 85, (codes.count(201), codes.count(429))
    assert store.count() == codes.count(201)
    assert call(url + "api/results", "tok-bob", rec(attempt=1))[0] == 201  # the limit is per learner
    print(f"alice: {codes.count(201)} stored, {codes.count(429)} refused (429); bob's api/mine meanwhile: "
          f"median {statistics.median(lat) * 1000:.1f} ms, max {max(lat) * 1000:.1f} ms")
    assert max(lat) < 0.5


def test_rows_per_learner_and_exercise_are_bounded(tmp_path):
    store = ps.Store(tmp_path / "p.sqlite")
    for i in range(1, ps.MAX_ROWS_PER_EXERCISE + 51):
        store.add("alice", {"exercise": "02.vector-add", "status": "failed", "attempt": i, "hints": 0, "time": ""})
    store.add("alice", {"exercise": "02.vector-add", "status": "passed", "attempt": 9999, "hints": 0, "time": ""})
    assert store.count() == ps.MAX_ROWS_PER_EXERCISE
    cell = store.cells()["alice"]["02.vector-add"]
    assert cell.solved and cell.attempts == 9999  # the newest verdict is still there


# ---------------------------------------------------------------------------------------------- #13


def test_the_progress_database_is_the_services_own(tmp_path):
    os.umask(0o022)
    ps.Store(tmp_path / "p.sqlite")
    assert stat.S_IMODE(os.stat(tmp_path / "p.sqlite").st_mode) == 0o600


def test_secure_state_makes_the_hub_state_private(tmp_path):
    from labkit.hub_setup import secure_state

    old = os.umask(0o022)
    try:
        state = tmp_path / "state"
        state.mkdir(mode=0o755)
        (state / "jupyterhub.sqlite").write_text("hashes")
        os.chmod(state / "jupyterhub.sqlite", 0o644)
        secure_state(state)
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(state / "jupyterhub.sqlite").st_mode) == 0o600
        (state / "new.sqlite").write_text("")  # made later by the hub: the umask is 0077 now
        assert stat.S_IMODE(os.stat(state / "new.sqlite").st_mode) == 0o600
    finally:
        os.umask(old)


# ---------------------------------------------------------------------------------------------- #6


def test_a_forged_pass_never_reaches_the_graded_column(svc, tmp_path):
    """#6: mallory posts "passed" for every exercise; the CSV showed it like a real pass. Now it is in the
    "self-reported progress" column only; the grade is Otter's, from her submitted notebook graded by the
    instructor (0 here), and empty where nothing was graded."""
    store, _, url = svc
    for ex in sorted(EXERCISES):  # the forgery: tok-alice stands for mallory's server token
        assert call(url + "api/results", "tok-alice", rec(exercise=ex, status="passed", attempt=1))[0] == 201
    graded = tmp_path / "otter"
    (graded / "alice").mkdir(parents=True)
    (graded / "alice" / "results.json").write_text(json.dumps(
        {"score": 0.0, "tests": [{"name": "02.vector-add", "score": 0.0, "max_score": 1.0}]}))
    text = gradebook.to_csv(store.cells(), EXERCISES, gradebook.read_otter_results(graded))
    import csv
    import io

    rows = {r["exercise"]: r for r in csv.DictReader(io.StringIO(text)) if r["user"] == "alice"}
    assert all(r["self-reported progress"] == "passed" for r in rows.values())
    assert rows["02.vector-add"]["grade"] == "0.0" and rows["02.vector-add"]["out of"] == "1.0"
    assert rows["03.transpose"]["grade"] == ""  # not graded: no mark at all, whatever was posted
    assert "status" not in text.splitlines()[0].split(",")  # no column a spreadsheet would read as a verdict
    # the service's own CSV has the grade column empty: it never turns a posted record into a mark
    status, served = call(url + "api/summary?format=csv", "tok-ingrid")
    assert status == 200 and all(r["grade"] == "" for r in csv.DictReader(io.StringIO(served)))
    status, page = call(url, "tok-ingrid")
    assert "not marks" in page


# ---------------------------------------------------------------------------------------------- #19


def test_a_record_for_an_exercise_the_service_does_not_know_yet_is_kept(svc, tmp_path, monkeypatch):
    """#19: a record refused with 400 because the hub's labkit was older was marked final and never sent again.
    Now the service answers 422, and the kernel keeps the record (after sending the others), so an updated service
    stores it."""
    _, _, url = svc
    status, _ = call(url + "api/results", "tok-alice", rec(exercise="09.not-yet-here"))
    assert status == 422
    monkeypatch.setenv("LABKIT_PROGRESS_FILE", str(tmp_path / "progress.jsonl"))
    monkeypatch.setattr(progress, "in_hub", lambda: True)
    monkeypatch.setattr(progress, "enabled", lambda: True)
    monkeypatch.setattr(progress, "progress_file", lambda: tmp_path / "progress.jsonl")
    answers = {"09.not-yet-here": 422, "02.vector-add": 201}
    monkeypatch.setattr(progress, "post", lambda r, **kw: answers[r.exercise])
    progress.append(progress.make_record("09.not-yet-here", "passed"))
    progress.append(progress.make_record("02.vector-add", "passed"))
    assert progress.flush(force=True) == 1
    assert [r.exercise for r in progress.unsent()] == ["09.not-yet-here"]
    answers["09.not-yet-here"] = 201  # the hub's labkit is updated
    assert progress.flush(force=True) == 1 and progress.unsent() == []


# ---------------------------------------------------------------------------------------------- #18


def test_the_live_page_sends_its_xsrf_token_and_never_reloads_in_a_loop():
    page = ps.render_page({"exercises": [], "learners": [], "stuck_after_minutes": 10}, 5, xsrf="2|abc|def|123")
    assert 'const XSRF = "2|abc|def|123";' in page and '"X-XSRFToken": XSRF' in page
    assert 'sessionStorage.getItem("labkit-reloaded")' in page


def test_the_graded_gradebook_from_the_command_line(tmp_path, capsys):
    """``python -m labkit.gradebook --otter RESULTS --progress CSV``: grades from Otter's results only; a learner's
    posted "passed" stays in the progress column."""
    cell = ps.Cell(solved=True, attempts=1, hints=0, first=0.0, last=0.0, status="passed")
    (tmp_path / "progress.csv").write_text(gradebook.to_csv({"mallory": {"02.vector-add": cell}, "=bob": {"02.vector-add": cell}}))
    (tmp_path / "otter").mkdir()
    (tmp_path / "otter" / "mallory.json").write_text(json.dumps({"tests": [{"name": "02.vector-add", "score": 0, "max_score": 1}]}))
    assert gradebook.main(["--otter", str(tmp_path / "otter"), "--progress", str(tmp_path / "progress.csv")]) == 0
    import csv
    import io

    got = {(r["user"], r["exercise"]): r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert got[("mallory", "02.vector-add")]["self-reported progress"] == "passed"
    assert got[("mallory", "02.vector-add")]["grade"] == "0.0"
    assert got[("'=bob", "02.vector-add")]["grade"] == ""
    assert gradebook.main(["--otter", str(tmp_path / "none")]) == 2
