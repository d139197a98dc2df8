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

No record is lost to a service that is down: the file is the record, and ``progress.sent`` beside it lists the
records the service has acknowledged. Every check, and every kernel start (:func:`kernel_start`, run by the
image's IPython kernel configuration), sends the records not acknowledged yet, oldest first (:func:`flush`). After a
failure the next try waits (:data:`BACKOFF_S`, doubling up to :data:`BACKOFF_MAX_S`), so a check never waits on a
service that is not there. A record is sent until it is acknowledged, and the service keeps each
(user, exercise, attempt) once, so a record whose acknowledgement was lost is stored once all the same.

``labkit progress [--json]`` shows the learner's map of the course from the file (:func:`summary`).

This module imports nothing of :mod:`labkit.check`: the check harness gives it the verdict and the hints
(:func:`record`), and ``labkit progress`` gives it the course's exercises (:func:`summary`).
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

#: The version of one record's layout; the service refuses others.
RECORD_VERSION = 1
#: The hub service's name (JupyterHub routes it at ``/services/labkit-progress/``).
SERVICE_NAME = "labkit-progress"
#: Seconds one post to the service may take before it counts as failed.
POST_TIMEOUT_S = 2.0
#: Seconds before the first retry after a failed post; each further failure doubles it, up to :data:`BACKOFF_MAX_S`.
BACKOFF_S = 5.0
BACKOFF_MAX_S = 300.0
#: Seconds one check may spend sending records (the rest go with the next check).
FLUSH_BUDGET_S = 3.0
STATUSES = ("passed", "failed", "unsolved")
#: A record's ``time``: UTC, to the second (the service reads it back with the same format).
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
#: HTTP answers after which a record is never sent again: stored (200, 201; 409 a duplicate), or refused for good
#: (400, 413: the record itself is wrong). Anything else (no answer, 5xx, 401/403/404 while the hub restarts,
#: 408, 429) is tried again later.
FINAL_CODES = frozenset({200, 201, 409, 400, 413})
#: The service does not know the record's exercise (its labkit is older than the course image's): the record is
#: kept and offered again at every later send, after the others, until an updated service stores it.
LATER_CODE = 422

_ATTEMPTS: dict[str, int] = {}  # exercise id -> attempts counted in this process (when the file cannot be read)
_NEXT_TRY = 0.0  # time.monotonic() before which no post is tried (backoff)
_DELAY = 0.0  # the backoff now
_FLUSH_LOCK = threading.Lock()


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

    @property
    def key(self) -> tuple[str, int]:
        """What identifies a record for this learner: (exercise, attempt); the service keeps each once."""
        return (self.exercise, self.attempt)


def enabled() -> bool:
    """False when ``LABKIT_PROGRESS`` is ``off`` (or ``0``, ``false``, ``no``)."""
    return os.environ.get("LABKIT_PROGRESS", "on").strip().lower() not in ("off", "0", "false", "no")


def progress_file() -> Path:
    """``$XDG_DATA_HOME/labkit/progress.jsonl`` (``~/.local/share`` when ``XDG_DATA_HOME`` is unset or relative)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / "labkit" / "progress.jsonl"


def sent_file(path: Path | None = None) -> Path:
    """``progress.sent`` beside the progress file: one line per record the service has answered for good."""
    return (path or progress_file()).with_name("progress.sent")


def _parse(line: str) -> Record | None:
    try:
        d = json.loads(line)
        return Record(str(d["exercise"]), str(d["status"]), str(d["time"]), int(d["attempt"]), int(d["hints"]))
    except (ValueError, KeyError, TypeError):
        return None


def read(path: Path | None = None) -> list[Record]:
    """Every well-formed record in the progress file, oldest first (a damaged line is skipped, not fatal)."""
    p = path or progress_file()
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [r for r in map(_parse, lines) if r is not None]


def read_sent(path: Path | None = None) -> dict[tuple[str, int], int]:
    """(exercise, attempt) -> the service's final answer (201 stored, 200/409 already there, 400/413 refused)."""
    out: dict[tuple[str, int], int] = {}
    try:
        lines = sent_file(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            d = json.loads(line)
            out[(str(d["exercise"]), int(d["attempt"]))] = int(d["code"])
        except (ValueError, KeyError, TypeError):
            continue
    return out


def unsent(path: Path | None = None) -> list[Record]:
    """The records of the file the service has not answered for good yet, oldest first."""
    done = read_sent(path)
    seen: set[tuple[str, int]] = set()
    out = []
    for r in read(path):
        if r.key not in done and r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


@contextmanager
def _locked(p: Path) -> Iterator[None]:
    """An exclusive lock on ``p``'s folder's lock file (several kernels of one learner count attempts in turn)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: one kernel at a time is the common case
        yield
        return
    with open(p.with_name(".progress.lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _stamp(now: float | None) -> str:
    return time.strftime(TIME_FORMAT, time.gmtime(time.time() if now is None else now))


def make_record(exercise_id: str, status: str, *, hints: int = 0, now: float | None = None) -> Record:
    """The next record for ``exercise_id`` (not written): its attempt number counts this check, after the file's
    history and this process's own count (the larger)."""
    previous = max([r.attempt for r in read() if r.exercise == exercise_id] if enabled() else [], default=0)
    attempt = max(previous, _ATTEMPTS.get(exercise_id, 0)) + 1
    _ATTEMPTS[exercise_id] = attempt
    return Record(exercise_id, status, _stamp(now), attempt, int(hints))


def append(record: Record, path: Path | None = None) -> None:
    """Append one record as a JSON line (creating the folder); raises ``OSError`` if the file cannot be written."""
    p = path or progress_file()
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record.to_json(), sort_keys=True) + "\n")


def _mark_sent(record: Record, code: int, path: Path | None = None) -> None:
    p = sent_file(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"exercise": record.exercise, "attempt": record.attempt, "code": int(code)}) + "\n")


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


def _ssl_context() -> Any:
    """For an https service address: the CA file in ``LABKIT_PROGRESS_CA`` (a self-signed hub), else the system's."""
    import ssl

    ca = os.environ.get("LABKIT_PROGRESS_CA", "").strip()
    return ssl.create_default_context(cafile=ca or None)


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
    context = _ssl_context() if base.startswith("https:") else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _failed() -> None:
    global _NEXT_TRY, _DELAY
    _DELAY = min(BACKOFF_MAX_S, max(BACKOFF_S, _DELAY * 2))
    _NEXT_TRY = time.monotonic() + _DELAY


def flush(*, budget_s: float = FLUSH_BUDGET_S, force: bool = False) -> int:
    """Send the records the service has not acknowledged, oldest first; returns how many it answered for good.

    Only inside a hub; not before the backoff of an earlier failure has passed (unless ``force``); stops at the
    first failure, or after ``budget_s`` seconds. Several threads of one kernel never send at the same time (a
    check waits for the kernel-start thread, then sends what is left). Never raises.
    """
    global _DELAY, _NEXT_TRY
    try:
        if not (enabled() and in_hub()) or (not force and time.monotonic() < _NEXT_TRY):
            return 0
        if not _FLUSH_LOCK.acquire(timeout=budget_s):  # another thread is sending: wait for it, then send the rest
            return 0
    except Exception:  # noqa: BLE001
        return 0
    done = 0
    try:
        deadline = time.monotonic() + budget_s
        for rec in unsent():
            if time.monotonic() > deadline:
                break
            try:
                code = post(rec)
            except Exception:  # noqa: BLE001 - no answer: try again later
                _failed()
                break
            if code == LATER_CODE:  # not yet: keep it, send the others
                continue
            if code not in FINAL_CODES:
                _failed()
                break
            _mark_sent(rec, code)
            _DELAY, _NEXT_TRY = 0.0, 0.0
            done += 1
    except Exception:  # noqa: BLE001 - a progress failure must never fail a check
        pass
    finally:
        _FLUSH_LOCK.release()
    return done


def kernel_start() -> threading.Thread | None:
    """At a kernel's start (the image's IPython kernel configuration calls it): send what earlier kernels left
    unsent, in a background thread so the kernel is not held up. Returns the thread (None when there is nothing to do)."""
    try:
        if not (enabled() and in_hub()) or not unsent():
            return None
        thread = threading.Thread(
            target=flush, kwargs={"budget_s": 60.0, "force": True}, name="labkit-progress-resend", daemon=True
        )
        thread.start()
        return thread
    except Exception:  # noqa: BLE001
        return None


def record(exercise_id: str, status: str, *, hints: int = 0) -> Record | None:
    """Record one check result: the file, then (inside a hub) every record the service has not acknowledged yet.
    Never raises. Returns the record (None when recording is off or failed before a record existed)."""
    try:
        if not enabled():
            return None
        p = progress_file()
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            with _locked(p):
                rec = make_record(exercise_id, status, hints=hints)
                append(rec, p)
        except OSError:  # the file cannot be written: the record goes to the service only
            rec = make_record(exercise_id, status, hints=hints)
            if in_hub():
                try:
                    post(rec)
                except Exception:  # noqa: BLE001
                    pass
            return rec
    except Exception:  # noqa: BLE001 - a progress failure must never fail a check
        return None
    flush()
    return rec


def _reset() -> None:
    """Forget the counted attempts and the backoff (tests; a new kernel)."""
    global _NEXT_TRY, _DELAY
    _ATTEMPTS.clear()
    _NEXT_TRY, _DELAY = 0.0, 0.0


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


def summary(exercises: Iterable[tuple[str, str]], records: Iterable[Record] | None = None) -> list[ExerciseProgress]:
    """Every exercise of ``exercises`` ((id, title) pairs, in course order; ``labkit.check.exercises()`` rows
    also do) with what the progress file says about it."""
    recs = list(read() if records is None else records)
    by_id: dict[str, list[Record]] = {}
    for r in recs:
        by_id.setdefault(r.exercise, []).append(r)
    rows = []
    for ex_id, title, *_ in exercises:
        mine = by_id.get(ex_id, [])
        if not mine:
            rows.append(ExerciseProgress(ex_id, title, "not run", 0, 0, None))
            continue
        status = "passed" if any(r.status == "passed" for r in mine) else "tried"
        rows.append(
            ExerciseProgress(ex_id, title, status, max(r.attempt for r in mine), max(r.hints for r in mine), mine[-1].time)
        )
    return rows


def cli(exercises: Iterable[tuple[str, str]], as_json: bool = False) -> int:
    """``labkit progress [--json]``: the learner's map of ``exercises`` (the course's, given by the command)."""
    rows = summary(exercises)
    waiting = len(unsent()) if in_hub() else 0
    if as_json:
        print(
            json.dumps(
                {"file": str(progress_file()), "enabled": enabled(), "unsent": waiting, "exercises": [asdict(r) for r in rows]},
                indent=2,
            )
        )
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
    if waiting:
        print(f"{waiting} record(s) not yet received by the classroom service: they are sent with your next check.")
    return 0
