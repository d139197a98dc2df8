"""The hub-managed ``labkit-progress`` service: learners' check results in SQLite, and the instructor's live page.

JupyterHub starts it (``python -m labkit.progress_service``, see ``deploy/jupyterhub/jupyterhub_config.py``) and
routes ``/services/labkit-progress/`` to it. Every request is authenticated by the hub
(:mod:`jupyterhub.services.auth`): a token in the ``Authorization`` header (a learner's server token, sent by
:mod:`labkit.progress` from the kernel) or, for the page in a browser, the hub's OAuth cookie.

Routes under the service prefix:

``POST api/results``
    One record (:class:`labkit.progress.Record` as JSON) for the token's own user: 201 when stored, 200 when that
    (user, exercise, attempt) was stored before (a record sent again keeps one row). Refused with a 4xx, storing
    nothing, when the token lacks ``access:services!service=labkit-progress`` (403), names another user (403),
    is malformed JSON, nested too deep, or a malformed record (400), is larger than :data:`MAX_BODY` (refused by
    tornado before it is read, by its ``Content-Length``), names an exercise this service does not know (422: the
    kernel keeps it and sends it again later, when an updated service may know it), or comes faster than
    :data:`RECORDS_PER_MINUTE` a learner (429, with ``Retry-After``).
``GET api/mine``
    The caller's own results: a learner reads only their own.
``GET api/summary``
    Learners x exercises (solved, attempts, hints, stuck for how long): instructors only (403 otherwise).
``GET``  (the prefix itself)
    The instructor's page: the same table, refreshed every few seconds.

An instructor is a hub user whose token carries :data:`INSTRUCTOR_SCOPE` (a custom scope the hub config defines and
gives to the ``instructor`` role; the service lists it in its ``oauth_client_allowed_scopes`` so that browser
logins carry it too). Being a hub admin is not enough.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import urlsplit

from labkit.progress import RECORD_VERSION, SERVICE_NAME, STATUSES, TIME_FORMAT

#: The custom JupyterHub scope that lets its holder read every learner's results.
INSTRUCTOR_SCOPE = "custom:labkit-progress:read-all"
#: Minutes without a pass, counted from the first try, after which a learner counts as stuck on an exercise.
STUCK_MINUTES = 10.0
#: Seconds between refreshes of the instructor's page.
REFRESH_S = 5
MAX_BODY = 4096  # a record is about 120 bytes; tornado refuses a longer body by its Content-Length, before reading it
#: Records one learner may post per minute (a burst of this many, then one every 60/N s); more answer 429.
RECORDS_PER_MINUTE = 60
#: Rows kept per learner and exercise: beyond this, a new attempt overwrites the learner's newest row for that
#: exercise (the verdict stays current; one learner cannot grow the database without bound).
MAX_ROWS_PER_EXERCISE = 200


#: What an exercise id looks like (``00.vector-add``); anything else is a malformed record (400), not a newer one.
_EXERCISE_ID = re.compile(r"[0-9]{2}[a-z0-9_]*\.[a-z0-9][a-z0-9._-]{0,60}")


class BadInput(Exception):
    """A request the service refuses: ``code`` is the HTTP status (4xx)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------------------------- validation


def known_exercises() -> set[str]:
    """The course's exercise ids (from the check registry)."""
    from labkit.check import core

    return {ex_id for ex_id, _, _ in core.exercises()}


def parse_record(body: bytes, user: str, known: set[str]) -> dict[str, Any]:
    """Validate one posted record for ``user``; raises :class:`BadInput` (400/403/413) for anything wrong."""
    if len(body) > MAX_BODY:
        raise BadInput(413, f"a record is at most {MAX_BODY} bytes")
    try:
        d = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise BadInput(400, "the body is not JSON") from None
    except RecursionError:
        raise BadInput(400, "the body is nested too deep") from None
    if not isinstance(d, dict):
        raise BadInput(400, "the body must be a JSON object")
    if "user" in d and d["user"] != user:
        raise BadInput(403, f"a token of {user!r} cannot post results for {d['user']!r}")
    allowed = {"v", "exercise", "status", "time", "attempt", "hints", "user"}
    extra = set(d) - allowed
    if extra:
        raise BadInput(400, f"unknown field(s) {sorted(extra)}: a record holds only {sorted(allowed - {'user'})}")
    if d.get("v", RECORD_VERSION) != RECORD_VERSION:
        raise BadInput(400, f"record version {d.get('v')!r}; this service reads version {RECORD_VERSION}")
    ex = d.get("exercise")
    if not isinstance(ex, str) or not _EXERCISE_ID.fullmatch(ex):
        raise BadInput(400, f"{ex!r} is not an exercise id")
    if ex not in known:
        raise BadInput(422, f"unknown exercise id {ex!r} (this service's labkit may be older than the course's)")
    if d.get("status") not in STATUSES:
        raise BadInput(400, f"status must be one of {STATUSES}")
    for key in ("attempt", "hints"):
        value = d.get(key, 0 if key == "hints" else None)
        if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "attempt" else 0) or value > 10_000:
            raise BadInput(400, f"{key} must be a whole number ({'from 1' if key == 'attempt' else 'from 0'})")
    stamp = d.get("time", "")
    if not isinstance(stamp, str) or len(stamp) > 40:
        raise BadInput(400, "time must be an ISO 8601 string")
    return {"exercise": ex, "status": d["status"], "attempt": d["attempt"], "hints": d.get("hints", 0), "time": stamp}


# ---------------------------------------------------------------------------------------------- storage


@dataclass(frozen=True)
class Cell:
    """One learner on one exercise, as the instructor sees it."""

    solved: bool
    attempts: int
    hints: int
    first: float  # seconds since the epoch, service clock
    last: float
    status: str  # the last verdict

    def stuck_minutes(self, now: float) -> float:
        """Minutes since the first try, when not solved (0 when solved)."""
        return 0.0 if self.solved else max(0.0, (now - self.first) / 60.0)


#: A record's own time is believed when it is at most this much older than its arrival (a record the kernel could
#: not send at once, sent later); older, or later than its arrival, the arrival time counts (a wrong clock).
CLIENT_TIME_WINDOW_S = 6 * 3600.0


def when(row: dict[str, Any]) -> float:
    """When a result happened: the record's own time if plausible (:data:`CLIENT_TIME_WINDOW_S`), else its arrival.
    A record sent again after the service was down keeps the time of the check, so "stuck" counts from the first try."""
    received = float(row["received"])
    try:
        import calendar

        t = float(calendar.timegm(time.strptime(row.get("client_time") or "", TIME_FORMAT)))
    except (ValueError, TypeError):
        return received
    return t if received - CLIENT_TIME_WINDOW_S <= t <= received + 60 else received


class Store:
    """SQLite table of results; one connection, used from the service's one thread (a lock guards it anyway)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        if self.path != ":memory:":
            os.chmod(self.path, 0o600)  # the learners' results: the service's own, never world-readable
        self._lock = threading.Lock()
        with self._lock, self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS results (id INTEGER PRIMARY KEY, user TEXT NOT NULL, exercise TEXT NOT NULL, "
                "status TEXT NOT NULL, attempt INTEGER NOT NULL, hints INTEGER NOT NULL, client_time TEXT, received REAL NOT NULL)"
            )
            # one row per (user, exercise, attempt): a record sent again (its acknowledgement lost) is kept once.
            # A table from before this index may hold repeats: keep the first of each.
            self._db.execute("DELETE FROM results WHERE id NOT IN (SELECT MIN(id) FROM results GROUP BY user, exercise, attempt)")
            self._db.execute("CREATE UNIQUE INDEX IF NOT EXISTS one_per_attempt ON results (user, exercise, attempt)")

    def add(self, user: str, rec: dict[str, Any], received: float | None = None) -> bool:
        """Store one validated record for ``user``; False (nothing stored) when that attempt is already there.
        Past :data:`MAX_ROWS_PER_EXERCISE` rows for one (user, exercise), the newest row is overwritten instead."""
        with self._lock, self._db:
            key = (user, rec["exercise"])
            if self._db.execute(
                "SELECT 1 FROM results WHERE user = ? AND exercise = ? AND attempt = ?", (*key, rec["attempt"])
            ).fetchone():
                return False
            n, newest = self._db.execute("SELECT COUNT(*), MAX(id) FROM results WHERE user = ? AND exercise = ?", key).fetchone()
            if n >= MAX_ROWS_PER_EXERCISE:
                self._db.execute(
                    "UPDATE results SET status = ?, attempt = ?, hints = ?, client_time = ?, received = ? WHERE id = ?",
                    (
                        rec["status"],
                        rec["attempt"],
                        rec["hints"],
                        rec["time"],
                        time.time() if received is None else received,
                        newest,
                    ),
                )
                return True
            cur = self._db.execute(
                "INSERT OR IGNORE INTO results (user, exercise, status, attempt, hints, client_time, received) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    user,
                    rec["exercise"],
                    rec["status"],
                    rec["attempt"],
                    rec["hints"],
                    rec["time"],
                    time.time() if received is None else received,
                ),
            )
            return cur.rowcount == 1

    def rows(self, user: str | None = None) -> list[dict[str, Any]]:
        """Every stored result (or one user's), oldest first."""
        sql = "SELECT user, exercise, status, attempt, hints, client_time, received FROM results"
        args: tuple = ()
        if user is not None:
            sql, args = sql + " WHERE user = ?", (user,)
        with self._lock:
            cur = self._db.execute(sql + " ORDER BY id", args)
            names = [c[0] for c in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]

    def count(self) -> int:
        """How many results are stored."""
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def cells(self) -> dict[str, dict[str, Cell]]:
        """user -> exercise -> :class:`Cell`."""
        out: dict[str, dict[str, Cell]] = {}
        for r in self.rows():
            prev = out.setdefault(r["user"], {}).get(r["exercise"])
            solved = r["status"] == "passed" or (prev is not None and prev.solved)
            t = when(r)
            if prev is None:
                cell = Cell(solved, r["attempt"], r["hints"], t, t, r["status"])
            else:
                cell = Cell(
                    solved, max(prev.attempts, r["attempt"]), max(prev.hints, r["hints"]), min(prev.first, t), t, r["status"]
                )
            out[r["user"]][r["exercise"]] = cell
        return out


def summary(
    store: Store, exercises: Iterable[str], *, stuck_minutes: float = STUCK_MINUTES, now: float | None = None
) -> dict[str, Any]:
    """The instructor's table as JSON: learners, exercises (those tried, in course order) and one cell per pair."""
    now = time.time() if now is None else now
    cells = store.cells()
    tried = {ex for per in cells.values() for ex in per}
    order = [ex for ex in sorted(exercises) if ex in tried]
    learners = []
    for user in sorted(cells):
        row = {}
        for ex, c in cells[user].items():
            stuck = c.stuck_minutes(now)
            row[ex] = {
                "solved": c.solved,
                "attempts": c.attempts,
                "hints": c.hints,
                "status": c.status,
                "stuck_minutes": round(stuck, 1),
                "stuck": (not c.solved) and stuck >= stuck_minutes,
            }
        learners.append({"user": user, "solved": sum(c.solved for c in cells[user].values()), "cells": row})
    return {"exercises": order, "learners": learners, "stuck_after_minutes": stuck_minutes, "generated": now}


def render_table(data: dict[str, Any]) -> str:
    """The table of :func:`summary` as HTML (rows: learners, columns: exercises)."""
    exs = data["exercises"]
    head = "".join(f"<th>{html.escape(e)}</th>" for e in exs)
    body = []
    for lr in data["learners"]:
        tds = []
        for e in exs:
            c = lr["cells"].get(e)
            if c is None:
                tds.append('<td class="none"></td>')
                continue
            cls = "solved" if c["solved"] else ("stuck" if c["stuck"] else "trying")
            verdict = {"failed": "not yet", "unsolved": "skeleton", "passed": "solved"}.get(c["status"], c["status"])
            text = "solved" if c["solved"] else (f"stuck {c['stuck_minutes']:g} min" if c["stuck"] else verdict)
            tries = f"{c['attempts']} {'try' if c['attempts'] == 1 else 'tries'}"
            hints = f"{c['hints']} {'hint' if c['hints'] == 1 else 'hints'}"
            tds.append(f'<td class="{cls}">{text}<br><small>{tries}, {hints}</small></td>')
        body.append(f"<tr><th>{html.escape(lr['user'])}</th><td>{lr['solved']}</td>{''.join(tds)}</tr>")
    return f"<table><tr><th>learner</th><th>solved</th>{head}</tr>{''.join(body)}</table>"


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>labkit progress</title>
<style>body{{font-family:sans-serif}}td,th{{border:1px solid #ccc;padding:4px;text-align:center}}
table{{border-collapse:collapse}}.solved{{background:#c8f0c8}}.stuck{{background:#f6c0c0}}.trying{{background:#fff3c0}}</style>
</head><body><h1>Who is where</h1>
<p>Stuck: not solved {stuck:g} minutes after the first try. Refreshed every {refresh:g} s. <span id="at"></span>
<a href="api/summary?format=csv" download>Self-reported progress (CSV): not marks</a></p>
<p id="lost" style="display:none;color:#a00"></p>
<div id="table">{table}</div>
<script>
// Refresh every {refresh:g} s. When the service does not answer (restarting), say so and try again, waiting longer each
// time (up to a minute); a service that hangs counts as not answering after 10 s; when it answers 401/403 (the
// login expired), reload the page once, which logs in again (never in a loop).
let wait = {refresh_ms}, failures = 0;
const XSRF = {xsrf};
function lost(text) {{ const p = document.getElementById("lost"); p.textContent = text; p.style.display = text ? "" : "none"; }}
async function refresh() {{
  try {{
    const r = await fetch("api/summary?format=html", {{credentials: "same-origin", cache: "no-store", headers: {{"X-XSRFToken": XSRF}},
                                                       signal: AbortSignal.timeout(Math.max(10000, 2 * {refresh_ms}))}});
    if ((r.status === 401 || r.status === 403) && !sessionStorage.getItem("labkit-reloaded")) {{
      sessionStorage.setItem("labkit-reloaded", "1"); window.location.reload(); return; }}  // once: no reload loop
    if (!r.ok) throw new Error("HTTP " + r.status);
    sessionStorage.removeItem("labkit-reloaded");
    document.getElementById("table").innerHTML = await r.text();
    document.getElementById("at").textContent = "Last update " + new Date().toLocaleTimeString();
    failures = 0; wait = {refresh_ms}; lost("");
  }} catch (e) {{
    failures += 1; wait = Math.min(60000, {refresh_ms} * 2 ** failures);
    lost("The progress service does not answer (" + e.message + "); trying again in " + Math.round(wait / 1000) + " s. "
         + "The table below is from " + (document.getElementById("at").textContent.replace("Last update ", "") || "the page's load") + ".");
  }}
  setTimeout(refresh, wait);
}}
setTimeout(refresh, wait);
</script></body></html>"""


def render_page(data: dict[str, Any], refresh_s: float = REFRESH_S, xsrf: str = "") -> str:
    """The instructor's whole page: the table now, and a script that fetches it again every ``refresh_s`` seconds,
    sending the service's XSRF token (``xsrf``): JupyterHub's OAuth refuses a script's cookie-authenticated fetch
    without it (401), and the page would reload itself at every refresh."""
    return _PAGE.format(
        table=render_table(data),
        stuck=data["stuck_after_minutes"],
        refresh=refresh_s,
        refresh_ms=round(refresh_s * 1000),
        xsrf=json.dumps(xsrf),
    )


# ---------------------------------------------------------------------------------------------- the tornado app


def is_instructor(model: dict[str, Any] | None) -> bool:
    """True when the hub's model of the caller holds :data:`INSTRUCTOR_SCOPE`."""
    return bool(model) and INSTRUCTOR_SCOPE in set(model.get("scopes") or ())


def cookie_secret(store: Store) -> bytes:
    """The secret that signs the instructor's login cookie, kept beside the database (``<db>.cookie-secret``, mode
    0600): a restarted service still knows the cookie of a page left open, which then goes on refreshing."""
    if store.path == ":memory:":
        return os.urandom(32)
    p = Path(store.path + ".cookie-secret")
    try:
        secret = bytes.fromhex(p.read_text().strip())
        if len(secret) >= 32:
            return secret
    except (OSError, ValueError):
        pass
    secret = os.urandom(32)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret.hex())
    return secret


def make_app(
    store: Store,
    *,
    prefix: str = "/",
    exercises: set[str] | None = None,
    stuck_minutes: float = STUCK_MINUTES,
    hub_auth: Any = None,
    refresh_s: float = REFRESH_S,
    records_per_minute: int = RECORDS_PER_MINUTE,
) -> Any:
    """The tornado application under ``prefix``. ``hub_auth`` defaults to a :class:`HubOAuth` configured from the
    environment JupyterHub gives a managed service; the page refreshes every ``refresh_s`` seconds."""
    from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
    from tornado import web

    known = set(known_exercises() if exercises is None else exercises)
    limit = RateLimit(records_per_minute)
    if hub_auth is None:
        hub_auth = HubOAuth(api_token=os.environ.get("JUPYTERHUB_API_TOKEN", ""), cache_max_age=60)
    prefix = prefix if prefix.endswith("/") else prefix + "/"

    class Base(HubOAuthenticated, web.RequestHandler):
        def initialize(self) -> None:
            self.hub_auth = hub_auth

        def write_error(self, status_code: int, **kwargs: Any) -> None:
            reason = self._reason
            exc = kwargs.get("exc_info", (None, None))[1]
            if isinstance(exc, web.HTTPError) and exc.log_message:
                reason = exc.log_message
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"status": status_code, "message": reason}))

        def hub_user(self) -> dict[str, Any]:
            """The authenticated caller, or 401 (no credentials) / 403 (credentials without the service's scope)."""
            user = self.current_user
            if not user:
                had_token = bool(self.hub_auth.get_token(self, in_cookie=False))
                raise web.HTTPError(403 if had_token else 401, "a hub token with access to this service is needed")
            return user

        def instructor(self) -> dict[str, Any]:
            user = self.hub_user()
            if not is_instructor(user):
                raise web.HTTPError(403, f"{user['name']} is not an instructor: only instructors see everyone's results")
            return user

    class Results(Base):
        def check_xsrf_cookie(self) -> None:  # token-authenticated only (see post): no cookie, so no XSRF to check
            return None

        def post(self) -> None:
            user = self.hub_user()
            if not getattr(self, "_token_authenticated", False):  # a browser's cookie could be made to post (CSRF)
                raise web.HTTPError(403, "results are posted with a token (the server's JUPYTERHUB_API_TOKEN)")
            if user.get("kind", "user") != "user":
                raise web.HTTPError(403, "only users post results")
            wait = limit.take(user["name"])
            if wait:
                self.set_header("Retry-After", str(int(wait) + 1))
                raise web.HTTPError(429, f"more than {records_per_minute} records a minute: wait {wait:.0f} s")
            try:
                rec = parse_record(self.request.body, user["name"], known)
            except BadInput as exc:
                raise web.HTTPError(exc.code, str(exc)) from None
            new = store.add(user["name"], rec)
            self.set_status(201 if new else 200)  # 200: this attempt was stored before (a record sent again)
            self.finish({"stored": rec, "user": user["name"], "duplicate": not new})

    class Mine(Base):
        def get(self) -> None:
            user = self.hub_user()
            self.finish({"user": user["name"], "results": store.rows(user["name"])})

    class Summary(Base):
        def get(self) -> None:
            self.instructor()
            if self.get_argument("format", "json") == "csv":  # the gradebook (labkit.gradebook)
                from labkit.classroom.gradebook import to_csv

                self.set_header("Content-Type", "text/csv; charset=utf-8")
                self.set_header("Content-Disposition", 'attachment; filename="labkit-gradebook.csv"')
                self.finish(to_csv(store.cells(), known))
                return
            data = summary(store, known, stuck_minutes=stuck_minutes)
            if self.get_argument("format", "json") == "html":
                self.set_header("Content-Type", "text/html; charset=utf-8")
                self.finish(render_table(data))
            else:
                self.finish(data)

    class Page(Base):
        @web.authenticated
        def get(self) -> None:
            self.instructor()
            self.set_header("Content-Type", "text/html; charset=utf-8")
            xsrf = self.xsrf_token
            self.finish(
                render_page(
                    summary(store, known, stuck_minutes=stuck_minutes),
                    refresh_s,
                    xsrf=xsrf.decode() if isinstance(xsrf, bytes) else str(xsrf),
                )
            )

    class Callback(HubOAuthCallbackHandler):
        # the app's own HubOAuth, the one that made the login's state: it keeps the PKCE code verifier the hub
        # asks for (JupyterHub 6); the handler's default, a fresh HubOAuth.instance(), would not have it
        def initialize(self) -> None:
            self.hub_auth = hub_auth

    return web.Application(
        [
            (prefix, Page),
            (prefix + "api/results", Results),
            (prefix + "api/mine", Mine),
            (prefix + "api/summary", Summary),
            (prefix + "oauth_callback", Callback),
        ],
        cookie_secret=cookie_secret(store),
    )


class RateLimit:
    """A token bucket per key: ``per_minute`` at once, then one every ``60 / per_minute`` s."""

    def __init__(self, per_minute: int = RECORDS_PER_MINUTE) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str, now: float | None = None) -> float:
        """0 when ``key`` may go ahead (one token taken), else the seconds until it may."""
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.get(key, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.rate)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1, now)
        return 0.0


#: The scope a token needs to reach the service at all (JupyterHub's own naming).
ACCESS_SCOPE = f"access:services!service={SERVICE_NAME}"


_SPAWNER_SECTIONS = (
    "KubeSpawner",
    "DockerSpawner",
    "SwarmSpawner",
    "SystemUserSpawner",
    "LocalProcessSpawner",
    "SimpleLocalProcessSpawner",
)


def _setting(section: Any, key: str, default: Any) -> Any:
    """A value already set in a traitlets config section, else ``default`` (never traitlets' lazy placeholder)."""
    from traitlets.config import LazyConfigValue

    value = dict.get(section, key, default)
    return default if isinstance(value, LazyConfigValue) else value


def configure_hub(
    c: Any,
    *,
    public_url: str,
    service_url: str = "http://127.0.0.1:10101",
    db: str = "labkit-progress.sqlite",
    instructors: Iterable[str] = (),
    instructor_group: str = "instructors",
    stuck_minutes: float = STUCK_MINUTES,
    python: str | None = None,
    progress_url: str | None = None,
    refresh_s: float = REFRESH_S,
) -> None:
    """Add the ``labkit-progress`` service to a JupyterHub configuration ``c`` (one place for the DGX config, the
    Kubernetes values and the test hub):

    - the managed service (``python -m labkit.progress_service``) listening at ``service_url``, its page
      refreshing every ``refresh_s`` seconds;
    - the custom scope :data:`INSTRUCTOR_SCOPE` and an ``instructor`` role holding it, given to ``instructors`` and
      to the group ``instructor_group``; every user gets :data:`ACCESS_SCOPE` through the ``user`` role
      (``load_roles``: JupyterHub 5, the Zero to JupyterHub chart's, has no ``extra_user_scopes``, and there a
      learner's server token without the scope could post nothing);
    - learners' server tokens carry :data:`ACCESS_SCOPE`, so their kernels can post results;
    - ``LABKIT_PROGRESS_URL`` in every server's environment: the service's address as the servers reach it,
      ``progress_url`` when given (the service's own address on the internal network: the DGX's Docker gateway, the
      hub's Service on Kubernetes, so posts never go through the public HTTPS proxy), else ``public_url`` (the proxy
      as seen from the servers) + ``services/labkit-progress/``.
    """
    import sys

    if not (isinstance(refresh_s, (int, float)) and refresh_s > 0):
        raise ValueError(f"refresh_s is the seconds between refreshes of the instructor's page (> 0), not {refresh_s!r}")
    services = [s for s in _setting(c.JupyterHub, "services", []) if s.get("name") != SERVICE_NAME]
    services.append(
        {
            "name": SERVICE_NAME,
            "url": service_url,
            "command": [
                python or sys.executable,
                "-m",
                "labkit.progress_service",
                "--db",
                db,
                "--stuck-minutes",
                f"{stuck_minutes:g}",
                "--refresh-s",
                f"{refresh_s:g}",
            ],
            "oauth_no_confirm": True,
            "oauth_client_allowed_scopes": [INSTRUCTOR_SCOPE],
            "display": True,
        }
    )
    c.JupyterHub.services = services
    custom = dict(_setting(c.JupyterHub, "custom_scopes", {}))
    custom[INSTRUCTOR_SCOPE] = {"description": "Read every learner's labkit check results (the instructor's progress page)."}
    c.JupyterHub.custom_scopes = custom
    roles = [r for r in _setting(c.JupyterHub, "load_roles", []) if r.get("name") != "instructor"]
    roles.append(
        {
            "name": "instructor",
            "description": "Sees every learner's progress",
            "scopes": [ACCESS_SCOPE, INSTRUCTOR_SCOPE],
            "users": sorted(instructors),
            "groups": [instructor_group],
        }
    )
    user_role = next((r for r in roles if r.get("name") == "user"), None)
    if user_role is None:
        roles.append(
            {
                "name": "user",
                "description": "Every user: their own things, and the labkit-progress service",
                "scopes": ["self", ACCESS_SCOPE],
            }
        )
    elif ACCESS_SCOPE not in user_role.get("scopes", []):
        user_role["scopes"] = [*user_role.get("scopes", ["self"]), ACCESS_SCOPE]
    c.JupyterHub.load_roles = roles
    # an authenticator that manages groups (OAuthenticator's allowed_groups) owns them: the hub refuses load_groups then
    managed = any(dict.get(c[name], "manage_groups", False) is True for name in list(c) if hasattr(c[name], "keys"))
    if not managed:
        groups = dict(_setting(c.JupyterHub, "load_groups", {}))
        groups.setdefault(instructor_group, {"users": sorted(instructors)})
        c.JupyterHub.load_groups = groups
    c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server", ACCESS_SCOPE]
    if progress_url is None:
        progress_url = public_url.rstrip("/") + f"/services/{SERVICE_NAME}/"
    elif not progress_url.endswith("/"):
        progress_url += "/"
    env = dict(_setting(c.Spawner, "environment", {}))
    env["LABKIT_PROGRESS_URL"] = progress_url
    c.Spawner.environment = env
    # a spawner class's own section replaces (does not merge with) Spawner's: Zero to JupyterHub, for one, puts
    # singleuser.extraEnv in c.KubeSpawner.environment. Add the URL there too.
    for name in _SPAWNER_SECTIONS:
        if name in c and "environment" in c[name]:
            own = dict(_setting(c[name], "environment", {}))
            own["LABKIT_PROGRESS_URL"] = progress_url
            c[name].environment = own
        if name in c and "server_token_scopes" in c[name]:
            c[name].server_token_scopes = list(c.Spawner.server_token_scopes)


def listen(app: Any, port: int, host: str) -> Any:
    """Serve ``app`` on ``host:port``; returns tornado's HTTPServer. A body longer than :data:`MAX_BODY` is refused
    by its ``Content-Length`` (or, chunked, as soon as it grows past it) before it is read into memory, and before
    any token is checked: an anonymous client cannot make the service buffer 100 MB."""
    return app.listen(port, host, max_body_size=MAX_BODY)


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.progress_service [--db PATH] [--stuck-minutes N] [--refresh-s S]``, started by JupyterHub as a
    managed service.

    It listens where ``JUPYTERHUB_SERVICE_URL`` says, or on ``LABKIT_PROGRESS_LISTEN`` (an address) at that port."""
    from tornado import ioloop

    p = argparse.ArgumentParser(prog="labkit-progress", description="The labkit-progress JupyterHub service.")
    p.add_argument("--db", default=os.environ.get("LABKIT_PROGRESS_DB", "labkit-progress.sqlite"), help="SQLite file")
    p.add_argument("--stuck-minutes", type=float, default=STUCK_MINUTES, help="minutes without a pass that count as stuck")
    p.add_argument("--refresh-s", type=float, default=REFRESH_S, help="seconds between refreshes of the instructor's page")
    args = p.parse_args(argv)
    if not args.refresh_s > 0:
        p.error(f"--refresh-s must be a positive number of seconds, not {args.refresh_s:g}")
    url = urlsplit(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101"))
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{SERVICE_NAME}/")
    app = make_app(Store(args.db), prefix=prefix, stuck_minutes=args.stuck_minutes, refresh_s=args.refresh_s)
    host = os.environ.get("LABKIT_PROGRESS_LISTEN") or url.hostname or "127.0.0.1"  # e.g. 0.0.0.0 behind a Service
    listen(app, url.port or 80, host)
    print(f"labkit-progress: listening on {host}:{url.port} at {prefix}, results in {args.db}", flush=True)
    ioloop.IOLoop.current().start()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
