"""Progress: every check result, recorded where it helps the learner and, in a classroom, the instructor.

Each check appends one line to the learner's own file, ``$XDG_DATA_HOME/labkit/progress.jsonl``
(``~/.local/share/labkit/progress.jsonl`` when ``XDG_DATA_HOME`` is unset)::

    {"v": 1, "exercise": "02.vector-add", "status": "failed", "time": "2026-12-01T09:12:03Z", "attempt": 2, "hints": 1}

Only the exercise id, the verdict, the time, the attempt number and how many hints were seen are kept; never the
learner's code or answer. ``LABKIT_PROGRESS=off`` turns recording off. Recording never fails a check: a file that
cannot be written, a service that does not answer, anything at all, is swallowed (see :func:`record`).

Inside JupyterHub (``JUPYTERHUB_API_TOKEN`` with ``JUPYTERHUB_SERVICE_PREFIX`` or ``JUPYTERHUB_API_URL`` set, as
the hub sets them for every learner's server and so for its kernels) each record is also sent to the hub-managed
``labkit-progress`` service (:mod:`labkit.progress_service`), authenticated with the server's token. The service's
address comes from ``LABKIT_PROGRESS_URL`` (the course's hub configurations set it), else from
``JUPYTERHUB_PUBLIC_URL`` (JupyterHub 5 and later) as ``<hub>/services/labkit-progress/``.

``labkit progress [--json]`` shows the learner's map of the course from the file (:func:`summary`).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

#: The version of one record's layout; the service refuses others.
RECORD_VERSION = 1
#: The hub service's name (JupyterHub routes it at ``/services/labkit-progress/``).
SERVICE_NAME = "labkit-progress"
#: Seconds a post to the service may take before it is given up (once failed, posting stops for the session).
POST_TIMEOUT_S = 2.0
STATUSES = ("passed", "failed", "unsolved")

_ATTEMPTS: dict[str, int] | None = None  # exercise id -> attempts so far (from the file, then counted here)
_POST_BROKEN = False  # a post failed: do not make every later check wait for a service that is not there


@dataclass(frozen=True)
class Record:
    """One check result as recorded: no code, no answer."""

    exercise: str
    status: str
    time: str
    attempt: int
    hints: int
    v: int = RECORD_VERSION

    def to_json(self) -> dict[str, Any]:
        """The record as the JSON object written to the file and sent to the service."""
        return asdict(self)


def enabled() -> bool:
    """False when ``LABKIT_PROGRESS`` is ``off`` (or ``0``, ``false``, ``no``)."""
    return os.environ.get("LABKIT_PROGRESS", "on").strip().lower() not in ("off", "0", "false", "no")


def progress_file() -> Path:
    """``$XDG_DATA_HOME/labkit/progress.jsonl`` (``~/.local/share`` when ``XDG_DATA_HOME`` is unset or relative)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / "labkit" / "progress.jsonl"


def read(path: Path | None = None) -> list[Record]:
    """Every well-formed record in the progress file, oldest first (a damaged line is skipped, not fatal)."""
    p = path or progress_file()
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out: list[Record] = []
    for line in lines:
        try:
            d = json.loads(line)
            out.append(Record(str(d["exercise"]), str(d["status"]), str(d["time"]), int(d["attempt"]), int(d["hints"])))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def make_record(exercise_id: str, status: str, *, hints: int = 0, now: float | None = None) -> Record:
    """The next record for ``exercise_id``: its attempt number counts this check (from the file's history on)."""
    global _ATTEMPTS
    if _ATTEMPTS is None:
        _ATTEMPTS = {}
        if enabled():
            for r in read():
                _ATTEMPTS[r.exercise] = max(_ATTEMPTS.get(r.exercise, 0), r.attempt)
    attempt = _ATTEMPTS.get(exercise_id, 0) + 1
    _ATTEMPTS[exercise_id] = attempt
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    return Record(exercise_id, status, stamp, attempt, int(hints))


def append(record: Record, path: Path | None = None) -> None:
    """Append one record as a JSON line (creating the folder); raises ``OSError`` if the file cannot be written."""
    p = path or progress_file()
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record.to_json(), sort_keys=True) + "\n")


def in_hub() -> bool:
    """True inside a JupyterHub learner's server (or its kernels): the hub's token and URLs are in the environment."""
    env = os.environ
    return bool(env.get("JUPYTERHUB_API_TOKEN")) and bool(env.get("JUPYTERHUB_SERVICE_PREFIX") or env.get("JUPYTERHUB_API_URL"))


def service_url() -> str | None:
    """The ``labkit-progress`` service's base URL (ending in ``/``), or None when it cannot be told."""
    url = os.environ.get("LABKIT_PROGRESS_URL", "").strip()
    if not url:
        public = os.environ.get("JUPYTERHUB_PUBLIC_URL", "").strip()
        if not public:
            return None
        parts = urllib.parse.urlsplit(public)
        base = os.environ.get("JUPYTERHUB_BASE_URL", "/") or "/"
        url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, base.rstrip("/") + f"/services/{SERVICE_NAME}/", "", ""))
    return url if url.endswith("/") else url + "/"


def post(record: Record, *, url: str | None = None, token: str | None = None, timeout: float = POST_TIMEOUT_S) -> int:
    """Send one record to the service's ``api/results``; returns the HTTP status (raises ``OSError`` on no answer)."""
    base = url or service_url()
    tok = token or os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if not base or not tok:
        raise OSError("no labkit-progress service address or token in this environment")
    req = urllib.request.Request(
        base + "api/results",
        data=json.dumps(record.to_json()).encode(),
        method="POST",
        headers={"Authorization": f"token {tok}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def record(exercise_id: str, status: str, *, hints: int = 0) -> Record | None:
    """Record one check result: the file, then the hub service when inside a hub. Never raises.

    Returns the record (None when recording is off or failed before a record existed).
    """
    global _POST_BROKEN
    try:
        if not enabled():
            return None
        rec = make_record(exercise_id, status, hints=hints)
    except Exception:  # noqa: BLE001 - a progress failure must never fail a check
        return None
    try:
        append(rec)
    except Exception:  # noqa: BLE001
        pass
    if in_hub() and not _POST_BROKEN:
        try:
            code = post(rec)
            if code >= 500:
                _POST_BROKEN = True
        except Exception:  # noqa: BLE001
            _POST_BROKEN = True
    return rec


def record_result(exercise_id: str, result: Any) -> None:
    """The check harness's hook: record a :class:`labkit.check.core.Result` with the hints seen so far. Never raises."""
    try:
        from .check import core

        hints = int(core._HINT_LEVEL.get(exercise_id, 0))
        record(exercise_id, str(result.status), hints=hints)
    except Exception:  # noqa: BLE001
        pass


def _reset() -> None:
    """Forget the counted attempts and a failed post (tests)."""
    global _ATTEMPTS, _POST_BROKEN
    _ATTEMPTS, _POST_BROKEN = None, False


# ---------------------------------------------------------------------------------------------- the learner's map


@dataclass(frozen=True)
class ExerciseProgress:
    """One exercise in the learner's map."""

    exercise: str
    title: str
    status: str  # passed (ever), tried (never passed), not run
    attempts: int
    hints: int
    last: str | None


def summary(records: Iterable[Record] | None = None) -> list[ExerciseProgress]:
    """Every registered exercise with what the progress file says about it, in course order."""
    from .check import core

    recs = list(read() if records is None else records)
    by_id: dict[str, list[Record]] = {}
    for r in recs:
        by_id.setdefault(r.exercise, []).append(r)
    rows = []
    for ex_id, title, _ in core.exercises():
        mine = by_id.get(ex_id, [])
        if not mine:
            rows.append(ExerciseProgress(ex_id, title, "not run", 0, 0, None))
            continue
        status = "passed" if any(r.status == "passed" for r in mine) else "tried"
        rows.append(ExerciseProgress(ex_id, title, status, max(r.attempt for r in mine), max(r.hints for r in mine), mine[-1].time))
    return rows


def cli(as_json: bool = False) -> int:
    """``labkit progress [--json]``: the learner's map of the course."""
    rows = summary()
    if as_json:
        print(json.dumps({"file": str(progress_file()), "enabled": enabled(), "exercises": [asdict(r) for r in rows]}, indent=2))
        return 0
    mark = {"passed": "[x]", "tried": "[~]", "not run": "[ ]"}
    lab = None
    print(f"progress file: {progress_file()}" + ("" if enabled() else "  (recording is off: LABKIT_PROGRESS=off)"))
    for r in rows:
        if r.exercise[:2] != lab:
            lab = r.exercise[:2]
            print(f"\nLab {lab}")
        extra = f"  {r.attempts} attempt(s), {r.hints} hint(s)" if r.attempts else ""
        print(f"  {mark[r.status]} {r.exercise:<28} {r.title}{extra}")
    solved = sum(r.status == "passed" for r in rows)
    print(f"\n{solved} of {len(rows)} exercises passed.")
    return 0
