"""The CSV gradebook: rows from the service's cells (labkit.gradebook), and the instructor's download from the live
service (``api/summary?format=csv``) against the stand-in hub of test_progress_service. About 1 s."""

from __future__ import annotations

import csv
import io
import threading
from http.server import ThreadingHTTPServer

import pytest

pytest.importorskip("jupyterhub")

from labkit import gradebook  # noqa: E402
from labkit import progress_service as ps  # noqa: E402
from test_progress_service import FakeHubAPI, call, rec, start_service  # noqa: E402


P = "self-reported progress"


def parse(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_rows_keep_a_pass_and_the_last_verdict(tmp_path) -> None:
    store = ps.Store(tmp_path / "p.sqlite")
    store.add("bob", {"exercise": "03.transpose", "status": "unsolved", "attempt": 1, "hints": 0, "time": None}, received=1)
    store.add("alice", {"exercise": "02.vector-add", "status": "failed", "attempt": 1, "hints": 0, "time": None}, received=1)
    store.add("alice", {"exercise": "02.vector-add", "status": "passed", "attempt": 2, "hints": 2, "time": None}, received=2)
    store.add("alice", {"exercise": "02.vector-add", "status": "failed", "attempt": 3, "hints": 2, "time": None}, received=3)
    store.add("bob", {"exercise": "03.transpose", "status": "failed", "attempt": 2, "hints": 1, "time": None}, received=2)
    text = gradebook.to_csv(store.cells())
    assert text.splitlines()[0] == ",".join(gradebook.COLUMNS)
    assert parse(text) == [
        {"user": "alice", "exercise": "02.vector-add", P: "passed", "attempts": "3", "hints": "2", "grade": "", "out of": ""},
        {"user": "bob", "exercise": "03.transpose", P: "failed", "attempts": "2", "hints": "1", "grade": "", "out of": ""},
    ]
    assert gradebook.rows(store.cells(), exercises={"03.transpose"}) == [("bob", "03.transpose", "failed", 2, 1, "", "")]
    assert gradebook.to_csv({}) == "user,exercise,self-reported progress,attempts,hints,grade,out of\r\n"


def test_a_name_is_never_a_spreadsheet_formula() -> None:
    cell = ps.Cell(solved=False, attempts=1, hints=0, first=0.0, last=0.0, status="failed")
    text = gradebook.to_csv({"=HYPERLINK(\"x\")": {"00.vector-add": cell}, "a,b": {"00.vector-add": cell}})
    users = [r["user"] for r in parse(text)]
    assert users == ["'=HYPERLINK(\"x\")", "a,b"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    hub = ThreadingHTTPServer(("127.0.0.1", 0), FakeHubAPI)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    store = ps.Store(tmp_path_factory.mktemp("gradebook") / "progress.sqlite")
    port, stop, _ = start_service(store, hub.server_port)
    yield f"http://127.0.0.1:{port}/services/labkit-progress/"
    stop()
    hub.shutdown()
    hub.server_close()


def test_instructor_downloads_the_gradebook(live: str) -> None:
    assert call(live + "api/results", "tok-alice", rec(status="failed", attempt=1))[0] == 201
    assert call(live + "api/results", "tok-alice", rec(status="passed", attempt=2, hints=1))[0] == 201
    assert call(live + "api/results", "tok-bob", rec(exercise="03.transpose", status="unsolved"))[0] == 201
    status, text = call(live + "api/summary?format=csv", "tok-ingrid")
    assert status == 200
    assert parse(text) == [
        {"user": "alice", "exercise": "02.vector-add", P: "passed", "attempts": "2", "hints": "1", "grade": "", "out of": ""},
        {"user": "bob", "exercise": "03.transpose", P: "unsolved", "attempts": "1", "hints": "0", "grade": "", "out of": ""},
    ]
    status, page = call(live, "tok-ingrid")
    assert status == 200 and 'href="api/summary?format=csv"' in page
    assert call(live + "api/summary?format=csv", "tok-alice")[0] == 403  # learners never see the others' grades
    assert call(live + "api/summary?format=csv")[0] == 401
