"""labkit.progress: the learner's progress file, LABKIT_PROGRESS=off, attempts and hints, and that a progress
failure never fails a check. Fast (well under a second), no network except one loopback server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from labkit import progress
from labkit.check import core


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("LABKIT_PROGRESS", raising=False)
    for key in ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_SERVICE_PREFIX", "JUPYTERHUB_API_URL", "LABKIT_PROGRESS_URL", "JUPYTERHUB_PUBLIC_URL"):
        monkeypatch.delenv(key, raising=False)
    progress._reset()
    yield tmp_path
    progress._reset()


@pytest.fixture
def toy_exercise(monkeypatch: pytest.MonkeyPatch):
    """A registered exercise of our own (the real registry is left as it was)."""
    ex_id = "99.progress-toy"

    def check(answer):
        if answer != 42:
            raise core.Failed("not 42", cause="wrong number")
        return "42 it is."

    monkeypatch.setitem(core._REGISTRY, ex_id, core.Exercise(ex_id, "toy", check, ("nudge", "closer")))
    monkeypatch.setattr(core, "_load_all", lambda: None)
    monkeypatch.delenv("LABKIT_EXPECT", raising=False)
    yield ex_id
    core._HINT_LEVEL.pop(ex_id, None)
    core._LAST.pop(ex_id, None)


def lines(home: Path) -> list[dict]:
    f = home / "labkit" / "progress.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def test_file_location_follows_xdg(data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert progress.progress_file() == data_home / "labkit" / "progress.jsonl"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/path")  # not absolute: the spec says ignore it
    monkeypatch.setenv("HOME", str(data_home / "home"))
    assert progress.progress_file() == data_home / "home" / ".local" / "share" / "labkit" / "progress.jsonl"


def test_each_check_appends_status_attempts_and_hints_never_code(data_home: Path, toy_exercise: str, capsys) -> None:
    core.run(toy_exercise, 41)
    core.hint(toy_exercise)
    core.run(toy_exercise, 41)
    core.run(toy_exercise, ...)
    assert core.run(toy_exercise, 42)
    recs = lines(data_home)
    assert [r["status"] for r in recs] == ["failed", "failed", "unsolved", "passed"]
    assert [r["attempt"] for r in recs] == [1, 2, 3, 4]
    assert [r["hints"] for r in recs] == [0, 1, 1, 1]
    assert all(set(r) == {"v", "exercise", "status", "time", "attempt", "hints"} for r in recs)
    assert all(41 not in r.values() for r in recs)  # the answer itself is never recorded
    assert all(r["time"].endswith("Z") and len(r["time"]) == 20 for r in recs)


def test_attempts_continue_from_the_file_in_a_new_session(data_home: Path, toy_exercise: str, capsys) -> None:
    core.run(toy_exercise, 1)
    core.run(toy_exercise, 2)
    progress._reset()  # a new kernel: the count comes back from the file
    core.run(toy_exercise, 42)
    assert [r["attempt"] for r in lines(data_home)] == [1, 2, 3]


def test_off_switch_writes_nothing(data_home: Path, toy_exercise: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("LABKIT_PROGRESS", "off")
    assert core.run(toy_exercise, 42)
    assert not (data_home / "labkit").exists()


def test_unwritable_file_never_fails_a_check(data_home: Path, toy_exercise: str, capsys) -> None:
    (data_home / "labkit").write_text("a file where the folder should be")
    result = core.run(toy_exercise, 42)
    assert result.passed and "[PASSED]" in capsys.readouterr().out


def test_a_broken_progress_module_never_fails_a_check(data_home: Path, toy_exercise: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    def boom(*a, **k):
        raise RuntimeError("progress is broken")

    monkeypatch.setattr(progress, "record", boom)
    assert core.run(toy_exercise, 42).passed
    monkeypatch.undo()
    monkeypatch.setattr(progress, "make_record", boom)
    assert progress.record(toy_exercise, "passed") is None


def test_damaged_lines_are_skipped(data_home: Path) -> None:
    f = data_home / "labkit" / "progress.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text('{"exercise": "00.x", "status": "passed", "time": "t", "attempt": 1, "hints": 0}\nnot json\n{"exercise": 3}\n')
    assert [r.exercise for r in progress.read()] == ["00.x"]


def test_summary_and_cli(data_home: Path, toy_exercise: str, capsys) -> None:
    core.run(toy_exercise, 1)
    core.run(toy_exercise, 42)
    rows = {r.exercise: r for r in progress.summary(core.exercises())}
    assert rows[toy_exercise].status == "passed" and rows[toy_exercise].attempts == 2
    capsys.readouterr()
    progress.cli(core.exercises(), as_json=True)
    doc = json.loads(capsys.readouterr().out)
    assert doc["enabled"] and any(e["exercise"] == toy_exercise and e["status"] == "passed" for e in doc["exercises"])
    progress.cli(core.exercises())
    out = capsys.readouterr().out
    assert "[x] 99.progress-toy" in out and f"1 of {len(rows)} exercises passed" in out


class _Recorder(BaseHTTPRequestHandler):
    seen: list = []
    code = 201

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen.append((self.path, self.headers.get("Authorization"), json.loads(body)))
        self.send_response(type(self).code)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_inside_a_hub_each_result_is_posted_with_the_server_token(data_home: Path, toy_exercise: str,
                                                                  monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        _Recorder.seen = []
        monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "server-token")
        monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/alice/")
        monkeypatch.setenv("LABKIT_PROGRESS_URL", f"http://127.0.0.1:{server.server_port}/services/labkit-progress")
        assert progress.in_hub()
        core.run(toy_exercise, 42)
        assert len(_Recorder.seen) == 1
        path, auth, body = _Recorder.seen[0]
        assert path == "/services/labkit-progress/api/results" and auth == "token server-token"
        assert body["exercise"] == toy_exercise and body["status"] == "passed" and "user" not in body
        assert len(lines(data_home)) == 1  # the file too
    finally:
        server.shutdown()
        server.server_close()


def test_a_service_that_is_not_there_is_tried_once(data_home: Path, toy_exercise: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    calls = []

    def refuse(rec, **kw):
        calls.append(rec)
        raise OSError("connection refused")

    monkeypatch.setattr(progress, "post", refuse)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "t")
    monkeypatch.setenv("JUPYTERHUB_API_URL", "http://127.0.0.1:9/hub/api")
    assert core.run(toy_exercise, 42) and core.run(toy_exercise, 42)
    assert len(calls) == 1 and len(lines(data_home)) == 2  # the second check is inside the backoff: not tried
    assert [r.attempt for r in progress.unsent()] == [1, 2]  # both kept for later


def test_service_url_from_the_hub_public_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LABKIT_PROGRESS_URL", raising=False)
    monkeypatch.delenv("JUPYTERHUB_PUBLIC_URL", raising=False)
    assert progress.service_url() is None
    monkeypatch.setenv("JUPYTERHUB_PUBLIC_URL", "https://hub.example.org/course/user/alice/")
    monkeypatch.setenv("JUPYTERHUB_BASE_URL", "/course/")
    assert progress.service_url() == "https://hub.example.org/course/services/labkit-progress/"


def test_labkit_progress_command(data_home: Path, toy_exercise: str, capsys) -> None:
    from labkit import cli

    core.run(toy_exercise, 42)
    capsys.readouterr()
    assert cli.main(["progress", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["file"] == str(data_home / "labkit" / "progress.jsonl")
    assert cli.main(["progress"]) == 0 and "[x] 99.progress-toy" in capsys.readouterr().out


def test_progress_imports_nothing_of_the_check_package() -> None:
    """No import cycle: labkit.check calls labkit.progress, never the other way round."""
    import ast

    tree = ast.parse(Path(progress.__file__).read_text())
    names = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {f"{n.module or ''}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not {n for n in names if "check" in n.split(".")}, names


class _Flaky(BaseHTTPRequestHandler):
    """Answers with the next code of ``codes`` (then 201), recording what was posted."""

    seen: list = []
    codes: list = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        code = type(self).codes.pop(0) if type(self).codes else 201
        type(self).seen.append((code, body["exercise"], body["attempt"]))
        self.send_response(code)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def flaky(data_home: Path, monkeypatch: pytest.MonkeyPatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    _Flaky.seen, _Flaky.codes = [], []
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "server-token")
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/alice/")
    monkeypatch.setenv("LABKIT_PROGRESS_URL", f"http://127.0.0.1:{server.server_port}/services/labkit-progress/")
    yield _Flaky
    server.shutdown()
    server.server_close()


def test_unsent_records_go_with_the_next_check_after_the_backoff(flaky, toy_exercise: str, monkeypatch, capsys) -> None:
    clock = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    flaky.codes = [503]  # the service restarting: the proxy answers 503
    core.run(toy_exercise, 1)
    assert [c for c, *_ in flaky.seen] == [503] and len(progress.unsent()) == 1
    clock[0] += progress.BACKOFF_S / 2
    core.run(toy_exercise, 2)  # inside the backoff: written, not sent
    assert len(flaky.seen) == 1 and len(progress.unsent()) == 2
    clock[0] += progress.BACKOFF_S
    flaky.codes = [502]
    core.run(toy_exercise, 3)  # tried again (oldest first), failed again: the backoff doubles
    assert flaky.seen[-1] == (502, toy_exercise, 1) and progress._DELAY == 2 * progress.BACKOFF_S
    clock[0] += 2 * progress.BACKOFF_S + 0.1
    core.run(toy_exercise, 42)
    assert [(e, a) for c, e, a in flaky.seen if c == 201] == [(toy_exercise, n) for n in (1, 2, 3, 4)]  # each once, in order
    assert progress.unsent() == [] and progress._DELAY == 0
    core.run(toy_exercise, 42)  # nothing sent twice
    assert [a for c, _, a in flaky.seen if c == 201] == [1, 2, 3, 4, 5]


def test_a_refused_record_is_not_sent_again_a_kernel_start_sends_the_rest(flaky, toy_exercise: str, capsys) -> None:
    flaky.codes = [400]  # refused for good (e.g. an exercise the service does not know)
    core.run(toy_exercise, 1)
    assert progress.read_sent() == {(toy_exercise, 1): 400} and progress.unsent() == []
    progress.append(progress.make_record(toy_exercise, "failed"))  # a record an earlier kernel left unsent
    assert progress.kernel_start().join(10) is None
    assert [(c, a) for c, _, a in flaky.seen] == [(400, 1), (201, 2)] and progress.unsent() == []
    assert progress.kernel_start() is None  # nothing left: no thread


def test_outside_a_hub_nothing_is_sent_and_the_kernel_hook_does_nothing(data_home: Path, toy_exercise: str, capsys) -> None:
    core.run(toy_exercise, 1)
    assert progress.flush(force=True) == 0 and progress.kernel_start() is None
