"""The course's own logins on the hub: NativeAuthenticator, hardened for a class with a hostile learner in it.

Learners sign up at ``/hub/signup`` (a password of at least :data:`labkit.hub_setup.MIN_PASSWORD` characters, not a
common one) and can log in once an instructor has approved them at ``/hub/authorize``. What this module adds to
NativeAuthenticator 1.3 (course/classroom.md, "Threat model", says why each matters):

Instructor names are reserved
    The instructors (:attr:`CourseNativeAuthenticator.instructors`) get their accounts when the hub starts, with
    :attr:`CourseNativeAuthenticator.instructor_password` (``LABKIT_ADMIN_PASSWORD``), already approved, and the hub
    records that the configuration made them (table ``labkit_instructor_accounts`` in the hub's database). An
    instructor name that already belongs to an account the configuration did not make (someone signed up under it
    before it became an instructor's) stops the hub with :class:`InstructorNameTaken`, which says how to remove it:
    the squatter never becomes an instructor, and the log never advises approving the account.
Names are normalised
    NFKC, then case-folded; only ``[a-z0-9._-]`` (:data:`USERNAME_PATTERN`); and a name whose look-alike skeleton
    (:func:`skeleton`: ``0``/``o``, ``1``/``l``/``i``, ``4``/``a``, ``3``/``e``, ``rn``/``m``, ..., punctuation
    at either end dropped, so ``ingrid.`` and ``m4llory`` count as ``ingrid`` and ``mallory``) equals an instructor's or an existing
    account's is refused at sign-up. Cyrillic, full-width or zero-width look-alikes of ``ingrid`` cannot sign up.
Failed logins are limited per (name, address), never per name alone
    NativeAuthenticator locked a *name* after 5 failures from anywhere, so anyone could keep the instructor out.
    Here one (name, address) pair is refused after :attr:`~CourseNativeAuthenticator.failed_logins_per_pair`
    failures in :attr:`~CourseNativeAuthenticator.lockout_s`; an address with
    :attr:`~CourseNativeAuthenticator.failed_logins_per_address` failures gets no more guesses at the names that
    failed from it, while a name that did not fail there still logs in (a classroom behind one NAT address is not
    locked out by a neighbour spraying made-up names). The address is read from ``X-Forwarded-For`` from the right,
    skipping the trusted proxies (loopback, :attr:`~CourseNativeAuthenticator.trusted_proxies`, and on Kubernetes
    the pods :attr:`~CourseNativeAuthenticator.trusted_proxy_selector` selects), only when the connection itself
    comes from a trusted proxy; ``X-Real-Ip`` is never believed.
Logins answer in the same time for every name
    The password is checked against a dummy bcrypt hash when the name has no account, so login timing does not say
    which names exist. The dummy hash always has the cost of the hashes the hub makes
    (:attr:`~CourseNativeAuthenticator.bcrypt_rounds`, bcrypt's default 12; tests that do not measure time lower it).
Hashing is off the event loop
    bcrypt runs in a worker thread (at most :data:`HASH_THREADS` at once), never on the hub's event loop, for logins,
    sign-ups and the login form's error message; sign-ups are limited per address
    (:attr:`~CourseNativeAuthenticator.signups_per_address` an hour) and in total pending
    (:attr:`~CourseNativeAuthenticator.max_pending`).
Approvals are POST forms, for the teaching role, and un-approving revokes
    ``/hub/authorize/<name>`` and ``/hub/discard/<name>`` answer a GET with a confirmation page; only its POST, with
    the hub's XSRF token, changes anything, and only for holders of the teaching role's
    :data:`~labkit.hub_setup.APPROVE_SCOPE` (instructors are not hub admins). Un-approving or discarding an account
    stops its servers, deletes its tokens and ends its logins (:func:`revoke_account`); an account that is not
    approved is refused at every refresh of its login and at every start; ``/hub/discard-pending`` discards every
    account waiting for approval at once (:meth:`~CourseNativeAuthenticator.refresh_user`,
    :meth:`~CourseNativeAuthenticator.pre_spawn_start`).
Sign-up needs the class's code
    With :attr:`~CourseNativeAuthenticator.signup_code` set (``LABKIT_SIGNUP_CODE``; the DGX config makes one), a
    sign-up without it is refused before anything is stored, so nobody outside the room fills the pending list.
Passwords change off the event loop
    ``/hub/change-password`` hashes in a worker thread, at most
    :attr:`~CourseNativeAuthenticator.password_changes_per_user` attempts per user per ``lockout_s``; nobody sets
    another user's password.

NativeAuthenticator 1.3's login form no longer works on JupyterHub 6 as it is (it times the login with the hub's
``statsd`` client, which JupyterHub 6 removed); :class:`CourseLoginHandler` is its handler without that timer.

This module imports ``nativeauthenticator``: only the hub's configuration imports it.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import html
import inspect
import ipaddress
import os
import re
import threading
import time
import unicodedata
from collections import deque
from typing import Any, Hashable

import bcrypt
from jupyterhub.utils import new_token
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.handlers import LocalBase
from nativeauthenticator.handlers import LoginHandler as NativeLoginHandler
from nativeauthenticator.orm import UserInfo
from tornado import web
from traitlets import Integer, List, Unicode

from labkit.classroom.hub_setup import APPROVE_SCOPE


def approve_scope(method: Any) -> Any:
    """A handler method for whoever holds :data:`~labkit.hub_setup.APPROVE_SCOPE` (the teaching role), else 403.
    (JupyterHub's ``needs_scope`` knows custom scopes only once the hub has started.)"""

    @functools.wraps(method)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.current_user is None or APPROVE_SCOPE not in getattr(self, "expanded_scopes", ()):
            raise web.HTTPError(403, "approving accounts needs the teaching role")
        return await method(self, *args, **kwargs)

    return wrapper


#: The user names a learner may sign up with: lower-case ASCII letters, digits, ``.``, ``_`` and ``-``, 1-32
#: characters, starting with a letter or digit. No ``:`` (the MIG allocator's ``container:`` keys), no look-alikes.
USERNAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,31}$"
#: How many bcrypt hashes run at once (each in a worker thread); more wait their turn, the event loop never does.
HASH_THREADS = max(1, (os.cpu_count() or 2) // 2)
#: bcrypt's cost (the log2 of its rounds) for the hashes this module makes: bcrypt's own default.
BCRYPT_ROUNDS = 12

_SKELETON = (
    ("rn", "m"),
    ("vv", "w"),
    ("cl", "d"),
    ("0", "o"),
    ("1", "l"),
    ("i", "l"),
    ("|", "l"),
    ("5", "s"),
    ("4", "a"),
    ("3", "e"),
    ("7", "t"),
    ("8", "b"),
    ("6", "b"),
    ("9", "g"),
    ("2", "z"),
    ("_", "-"),
    (".", "-"),
)


class InstructorNameTaken(RuntimeError):
    """An instructor name belongs to an account the configuration did not make: the hub does not start."""


def normalize_name(name: str) -> str:
    """``name`` as the hub stores it: Unicode NFKC (full-width letters become ASCII), case-folded, stripped."""
    return unicodedata.normalize("NFKC", name or "").casefold().strip()


def skeleton(name: str) -> str:
    """What ``name`` looks like: look-alike characters folded together (``1ngr1d`` and ``lngrld`` and ``ingrid`` are
    one skeleton), for refusing names that pass for an instructor's or another learner's."""
    s = normalize_name(name)
    for a, b in _SKELETON:
        s = s.replace(a, b)
    return re.sub("-+", "-", s).strip("-")  # `ingrid.` and `-ingrid` look like `ingrid`


class Throttle:
    """At most ``limit`` events per key in ``window_s`` seconds (a sliding window), in memory, thread-safe."""

    MAX_KEYS = 20_000  # beyond this, keys whose events are all old are dropped

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit, self.window_s = int(limit), float(window_s)
        self._events: dict[Hashable, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: Hashable, now: float) -> deque[float]:
        q = self._events.get(key)
        if q is None:
            return deque()
        while q and q[0] <= now - self.window_s:
            q.popleft()
        return q

    def retry_after(self, key: Hashable, now: float | None = None) -> float:
        """Seconds until ``key`` may act again (0: now)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            q = self._recent(key, now)
            if self.limit <= 0 or len(q) < self.limit:
                return 0.0
            return max(0.0, q[-self.limit] + self.window_s - now)

    def add(self, key: Hashable, now: float | None = None) -> None:
        """Count one event for ``key``."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if len(self._events) > self.MAX_KEYS:
                for k in [k for k, q in self._events.items() if not q or q[-1] <= now - self.window_s]:
                    del self._events[k]
            q = self._recent(key, now)
            q.append(now)
            self._events[key] = q

    def count(self, key: Hashable, now: float | None = None) -> int:
        """How many events ``key`` has in the window now."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return len(self._recent(key, now))

    def clear(self, key: Hashable) -> None:
        """Forget ``key``'s events."""
        with self._lock:
            self._events.pop(key, None)


def _is_trusted(address: str, trusted: tuple[str, ...]) -> bool:
    """Whether ``address`` is loopback or in one of ``trusted`` (addresses or networks)."""
    try:
        ip = ipaddress.ip_address(address.strip())
        return ip.is_loopback or any(ip in ipaddress.ip_network(t, strict=False) for t in trusted if t)
    except ValueError:
        return False


def client_address(handler: Any, trusted: tuple[str, ...] = ()) -> str:
    """The address a request came from. When the connection comes from a proxy (a loopback address, or one of
    ``trusted``), the ``X-Forwarded-For`` entries are read from the right, each appended by the hop before, and the
    first one that is not itself a trusted proxy is the client (a proxy in front of the proxy, such as the
    chart's HTTPS pod, is skipped when trusted); else the connection's own address. Entries a client wrote
    itself (further left) and ``X-Real-Ip`` are never believed."""
    request = getattr(handler, "request", None)
    if request is None:  # called without a request (the configuration's own checks)
        return ""
    peer = getattr(request.connection, "context", None)
    peer_ip = getattr(peer, "_orig_remote_ip", None) or request.remote_ip or ""
    if not _is_trusted(peer_ip, trusted):
        return peer_ip
    hops = [h.strip() for h in request.headers.get("X-Forwarded-For", "").split(",") if h.strip()]
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer_ip


_hash_slots: asyncio.Semaphore | None = None


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def in_thread(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a worker thread, at most :data:`HASH_THREADS` at once: bcrypt never blocks the event loop."""
    global _hash_slots
    if _hash_slots is None:
        _hash_slots = asyncio.Semaphore(HASH_THREADS)
    async with _hash_slots:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


@functools.lru_cache(maxsize=None)
def dummy_hash(rounds: int = BCRYPT_ROUNDS) -> bytes:
    """A bcrypt hash of cost ``rounds`` that no password matches: a login that names no account is checked against
    it, in the time a real check at that cost takes (made once per cost, at the authenticator's start)."""
    return bcrypt.hashpw(os.urandom(16).hex().encode(), bcrypt.gensalt(rounds))


def check_password(password: str, hashed: bytes | None, rounds: int = BCRYPT_ROUNDS) -> bool:
    """``password`` against a stored bcrypt hash, or, for ``None``, the dummy hash of cost ``rounds`` (the cost the
    hub's own hashes have): always False then, in the same time."""
    try:
        ok = bcrypt.checkpw((password or "").encode("utf-8", "surrogatepass"), hashed or dummy_hash(rounds))
    except (ValueError, TypeError):
        return False
    return ok and hashed is not None


def hash_password(password: str, rounds: int = BCRYPT_ROUNDS) -> bytes:
    """A bcrypt hash of ``password`` with cost ``rounds`` (the log2 of bcrypt's rounds)."""
    return bcrypt.hashpw(password.encode("utf-8", "surrogatepass"), bcrypt.gensalt(rounds))


class _NoTimer:
    """Stands in for the statsd timer NativeAuthenticator's login handler starts and stops."""

    def start(self) -> "_NoTimer":
        return self

    def stop(self, send: bool = True) -> None:
        return None


class _NoStatsd:
    """JupyterHub 5's statsd client, as far as the login handlers use it: every call does nothing."""

    def timer(self, name: str) -> _NoTimer:
        return _NoTimer()

    def __getattr__(self, name: str) -> Any:  # incr, gauge, timing, ...
        return lambda *args, **kwargs: None


class CourseLoginHandler(NativeLoginHandler):
    """NativeAuthenticator's login form, working on JupyterHub 5 and 6, with bcrypt off the event loop and a message
    that says when an address is refused for too many failures."""

    @property
    def statsd(self) -> Any:
        """The hub's statsd client where it has one (JupyterHub 5), else a stand-in that does nothing (6)."""
        real = self.settings.get("statsd")
        return real if real is not None else _NoStatsd()

    def _render(self, login_error: str | None = None, username: str | None = None, **_: Any) -> Any:
        return super()._render(login_error=login_error, username=username)

    async def post(self) -> None:
        data = {arg: self.get_argument(arg, strip=False) for arg in self.request.arguments}
        data.setdefault("username", "")
        data.setdefault("password", "")
        user = await self.login_user(data)
        if user:
            self._jupyterhub_user = user
            self.redirect(self.get_next_url(user))
            return
        auth = self.authenticator
        error = "Invalid username or password."
        wait = auth.login_retry_after(self, data["username"])
        if wait:
            error = f"Too many failed logins from your address: try again in {int(wait) + 1} s."
        elif getattr(self, "_labkit_unapproved", False):
            error = f"User {data['username']} has not been authorized by an administrator yet."
        self.finish(await self._render(login_error=error, username=data["username"]))


class CourseSignUpHandler(LocalBase):
    """``/hub/signup``: NativeAuthenticator's form, with names normalised and checked for look-alikes, sign-ups
    limited per address and in total, and the password hashed off the event loop."""

    async def get(self) -> None:
        if not self.authenticator.enable_signup:
            raise web.HTTPError(404)
        self.finish(await self._page())

    async def _page(self, message: str | None = None, alert: str = "alert-danger") -> str:
        page = await self.render_template(
            "signup.html",
            ask_email=False,
            result_message=message,
            alert=alert,
            two_factor_auth=False,
            two_factor_auth_user=False,
            two_factor_auth_value="",
            recaptcha_key=None,
            tos=self.authenticator.tos,
        )
        if self.authenticator.signup_code:  # a field for the class's code (or it comes in the link: ?code=...)
            given = html.escape(self.get_query_argument("code", ""), quote=True)
            field = (
                '<label for="class_code_input">Sign-up code (from your instructor):</label>'
                f'<input id="class_code_input" type="text" name="class_code" value="{given}" class="form-control" '
                'autocomplete="off" required /><br>'
            )
            page = page.replace('<label for="username_input">', field + '<label for="username_input">', 1)
        return str(page)

    async def post(self) -> None:
        auth: CourseNativeAuthenticator = self.authenticator
        if not auth.enable_signup:
            raise web.HTTPError(404)
        raw = self.get_body_argument("username", "", strip=False)
        password = self.get_body_argument("signup_password", "", strip=False)
        confirmation = self.get_body_argument("signup_password_confirmation", "", strip=False)
        address = client_address(self, await auth.refresh_trusted())
        code = self.get_body_argument("class_code", "", strip=False) or self.get_query_argument("code", "")
        problem = auth.signup_problem(raw, password, confirmation, address, code)
        if problem:
            self.set_status(429 if problem.startswith("Too many") else 400)
            self.finish(await self._page(problem))
            return
        auth.signups.add(address)
        hashed = await in_thread(hash_password, password, auth.bcrypt_rounds)
        user = auth.store_account(normalize_name(raw), hashed)
        if user is None:
            self.set_status(400)
            self.finish(await self._page("This user name is already in use or not allowed: choose another."))
            return
        self.finish(await self._page("Your information has been sent to the admin.", "alert-info"))


def _confirm_page(handler: Any, action: str, name: str) -> str:
    """A one-button page that POSTs ``action`` for ``name`` with the hub's XSRF token."""
    esc = html.escape(name)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{action} {esc}</title></head><body>"
        f"<form method='post'>{handler.xsrf_form_html()}<p>{action} the account <b>{esc}</b>?</p>"
        f"<button type='submit'>{action} {esc}</button> <a href='{handler.hub.base_url}authorize'>Back</a></form>"
        "</body></html>"
    )


async def revoke_account(handler: Any, name: str) -> dict[str, int]:
    """Take everything from the hub user ``name`` that a login gave: stop her servers (their MIG slices are freed
    by the spawner's stop hook), delete every token she holds (API tokens, her servers' OAuth tokens, so her
    browser's sessions on her servers end) and end her hub login everywhere (a new cookie id: the browser's hub
    cookie names no user any more). Returns what was done: ``{"servers": n, "tokens": n}``."""
    user = handler.find_user(name)
    if user is None:
        return {"servers": 0, "tokens": 0}
    stopped = 0
    for server_name, spawner in list(user.spawners.items()):
        if spawner.active:
            await handler.stop_single_user(user, server_name)
            stopped += 1
    tokens = list(user.orm_user.api_tokens)
    for token in tokens:
        handler.db.delete(token)
    user.orm_user.cookie_id = new_token()
    handler.db.commit()
    handler.log.info("labkit: revoked %s: %d server(s) stopped, %d token(s) deleted, logins ended", name, stopped, len(tokens))
    return {"servers": stopped, "tokens": len(tokens)}


class CourseAuthorizationAreaHandler(LocalBase):
    """``/hub/authorize``: NativeAuthenticator's list of accounts, for whoever holds the teaching role's
    :data:`~labkit.hub_setup.APPROVE_SCOPE` (instructors are not hub admins)."""

    @approve_scope
    async def get(self) -> None:
        html_page = await self.render_template(
            "authorization-area.html", ask_email=self.authenticator.ask_email_on_signup, users=self.db.query(UserInfo).all()
        )
        self.finish(html_page)


class CourseToggleAuthorizationHandler(LocalBase):
    """``/hub/authorize/<name>``: a GET shows a confirmation form; only its POST (with the XSRF token) approves or
    un-approves (NativeAuthenticator toggled on the GET itself: any page could make an instructor's browser do it).
    Un-approving revokes (:func:`revoke_account`): her servers stop, her tokens and logins end."""

    @approve_scope
    async def get(self, slug: str) -> None:
        info = self.authenticator.get_user(slug)
        if info is None:
            raise web.HTTPError(404, "no such account")
        self.finish(_confirm_page(self, "Unauthorize" if info.is_authorized else "Authorize", info.username))

    @approve_scope
    async def post(self, slug: str) -> None:
        info = self.authenticator.get_user(slug)
        if info is None:
            raise web.HTTPError(404, "no such account")
        if info.username in self.authenticator.instructor_names():
            raise web.HTTPError(403, "an instructor's account is made by the configuration: remove it there")
        was_authorized = bool(info.is_authorized)
        UserInfo.change_authorization(self.db, slug)
        if was_authorized:
            await revoke_account(self, info.username)
        self.redirect(self.hub.base_url + "authorize#" + slug)


class CourseDiscardHandler(LocalBase):
    """``/hub/discard/<name>``: a GET shows a confirmation form; its POST deletes a pending account."""

    @approve_scope
    async def get(self, user_name: str) -> None:
        self.finish(_confirm_page(self, "Discard", user_name))

    @approve_scope
    async def post(self, user_name: str) -> None:
        info = self.authenticator.get_user(user_name)
        if info is not None and not info.is_authorized:
            await revoke_account(self, info.username)
            self.authenticator.delete_user(type("User", (), {"name": info.username}))
            if self.users.get(info.username) is not None:
                self.users.delete(info.username)
        self.redirect(self.hub.base_url + "authorize")


class CourseDiscardPendingHandler(LocalBase):
    """``/hub/discard-pending``: a GET shows a confirmation form; its POST deletes every account still waiting for
    approval at once (a flood of junk sign-ups is one click, not one page per account)."""

    @approve_scope
    async def get(self) -> None:
        pending = self.authenticator.get_unauthed_amount_fast()
        self.finish(_confirm_page(self, "Discard", f"{pending} pending sign-up(s)"))

    @approve_scope
    async def post(self) -> None:
        auth = self.authenticator
        names = [i.username for i in self.db.query(UserInfo).filter(UserInfo.is_authorized.is_(False)).all()]
        for name in names:
            if name in auth.instructor_names():
                continue
            await revoke_account(self, name)
            auth.delete_user(type("User", (), {"name": name}))
            if self.users.get(name) is not None:
                self.users.delete(name)
        self.log.info("labkit: discarded %d pending sign-up(s)", len(names))
        self.redirect(self.hub.base_url + "authorize")


class CourseChangePasswordHandler(LocalBase):
    """``/hub/change-password``: NativeAuthenticator's form for one's own password, with both bcrypt hashes in a
    worker thread (never on the event loop) and at most :attr:`~CourseNativeAuthenticator.password_changes_per_user`
    attempts per user per ``lockout_s``."""

    async def _page(self, name: str, message: str | None = None, alert: str = "alert-danger") -> str:
        return await self.render_template("change-password.html", user_name=name, result_message=message, alert=alert)

    @web.authenticated
    async def get(self) -> None:
        user = await self.get_current_user()
        self.finish(await self._page(user.name))

    @web.authenticated
    async def post(self) -> None:
        user = await self.get_current_user()
        auth: CourseNativeAuthenticator = self.authenticator
        old = self.get_body_argument("old_password", "", strip=False)
        new = self.get_body_argument("new_password", "", strip=False)
        confirmation = self.get_body_argument("new_password_confirmation", "", strip=False)
        wait = auth.password_changes.retry_after(user.name)
        if wait:
            self.set_status(429)
            self.finish(await self._page(user.name, f"Too many attempts: try again in {int(wait) + 1} s."))
            return
        auth.password_changes.add(user.name)
        info = auth.get_user(user.name)
        if info is None or not await in_thread(check_password, old, info.password, auth.bcrypt_rounds):
            self.finish(await self._page(user.name, "Your current password was incorrect. Please try again."))
            return
        if new != confirmation:
            self.finish(await self._page(user.name, "Your new password didn't match the confirmation. Please try again."))
            return
        if not auth.is_password_strong(new):
            self.finish(
                await self._page(
                    user.name,
                    f"Choose a password of at least {auth.minimum_password_length} characters that is not a common one.",
                )
            )
            return
        info.password = await in_thread(hash_password, new, auth.bcrypt_rounds)
        self.db.commit()
        self.finish(await self._page(user.name, "Your password has been changed successfully!", "alert-success"))


class CourseChangePasswordAdminHandler(LocalBase):
    """``/hub/change-password/<name>``: refused. Nobody is a hub admin, and an instructor who could set a learner's
    password could log in as her; a learner who forgot hers is discarded and signs up again."""

    async def get(self, user_name: str) -> None:
        raise web.HTTPError(403, "passwords are changed by their owners only (/hub/change-password)")

    post = get


_HANDLERS = {
    r"/login": CourseLoginHandler,
    r"/signup": CourseSignUpHandler,
    r"/authorize": CourseAuthorizationAreaHandler,
    r"/authorize/([^/]*)": CourseToggleAuthorizationHandler,
    r"/discard/([^/]*)": CourseDiscardHandler,
    r"/discard-pending": CourseDiscardPendingHandler,
    r"/change-password": CourseChangePasswordHandler,
    r"/change-password/([^/]+)": CourseChangePasswordAdminHandler,
}


class CourseNativeAuthenticator(NativeAuthenticator):
    """NativeAuthenticator whose admin accounts come from the configuration, never from the sign-up form."""

    instructor_password = Unicode(
        "",
        config=True,
        help="The first password of each instructor's account (made when the hub starts, if it does not exist yet).",
    )
    failed_logins_per_address = Integer(
        50,
        config=True,
        help="Failed logins from one address within lockout_s before it is refused "
        "(a classroom behind one NAT address shares it)",
    )
    failed_logins_per_pair = Integer(5, config=True, help="Failed logins for one name from one address within lockout_s")
    lockout_s = Integer(600, config=True, help="The window of the failed-login limits, in seconds")
    signups_per_address = Integer(60, config=True, help="Sign-ups from one address per hour")
    max_pending = Integer(300, config=True, help="Sign-ups waiting for approval, at most (then sign-up is refused)")
    trusted_proxies = List(
        Unicode(), config=True, help="Addresses or networks (besides loopback) whose X-Forwarded-For is believed: the proxy's"
    )
    instructors = List(
        Unicode(), config=True, help="The instructors' names (LABKIT_INSTRUCTORS): accounts made by the configuration"
    )
    signup_code = Unicode(
        "",
        config=True,
        help="The class's sign-up code (LABKIT_SIGNUP_CODE): a sign-up without it is refused, so nobody outside the "
        "room can fill the pending list. Empty: anyone may sign up (the hub warns)",
    )
    password_changes_per_user = Integer(5, config=True, help="Password-change attempts per user within lockout_s")
    bcrypt_rounds = Integer(
        BCRYPT_ROUNDS,
        min=4,
        max=31,
        config=True,
        help="bcrypt's cost (the log2 of its rounds) for the hashes the hub makes (sign-ups, password changes, the "
        "instructors' accounts) and for the dummy hash a login naming no account is checked against, so both take "
        "the same time. Keep bcrypt's default, 12; only a test that does not measure time lowers it (4 is the least)",
    )
    trusted_proxy_selector = Unicode(
        "",
        config=True,
        help="Kubernetes: a label selector for the pods in the hub's namespace that are the proxy (e.g. "
        "'component in (proxy, autohttps)'); their current addresses are trusted, looked up every 30 s. Use it "
        "instead of the pod network's ranges, which hold every learner's pod too",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.address_failures = Throttle(self.failed_logins_per_address, self.lockout_s)
        self.pair_failures = Throttle(self.failed_logins_per_pair, self.lockout_s)
        self.signups = Throttle(self.signups_per_address, 3600)
        self.password_changes = Throttle(self.password_changes_per_user, self.lockout_s)
        self._proxy_pods: tuple[str, ...] = ()
        self._proxy_pods_at = -1e9
        self.refresh_pre_spawn = True  # an un-approved learner's start is refused (refresh_user)
        dummy_hash(self.bcrypt_rounds)  # now, not at the first login for a missing name
        if self.enable_signup and not self.signup_code:
            self.log.warning(
                "labkit: sign-up is open to anyone who reaches the hub (no LABKIT_SIGNUP_CODE): an outsider can fill "
                "the %d pending sign-ups. Set a code and tell it to the room, or LABKIT_SIGNUP=off.",
                self.max_pending,
            )
        self.ensure_instructor_accounts()

    # ------------------------------------------------------------------------------------------ names

    def normalize_username(self, username: str) -> str:
        """NFKC and case-folding (full-width ``ｉｎｇｒｉｄ`` is ``ingrid``), then JupyterHub's own (username_map)."""
        return super().normalize_username(normalize_name(username))

    def validate_username(self, username: str) -> bool:
        """Only :data:`USERNAME_PATTERN` names (JupyterHub's pattern check, then NativeAuthenticator's)."""
        return bool(re.fullmatch(USERNAME_PATTERN, username or "")) and super().validate_username(username)

    def trusted(self) -> tuple[str, ...]:
        """The proxies whose ``X-Forwarded-For`` is believed now: :attr:`trusted_proxies` and the proxy pods'
        addresses last looked up (:meth:`refresh_trusted`)."""
        return (*self.trusted_proxies, *self._proxy_pods)

    async def refresh_trusted(self) -> tuple[str, ...]:
        """Look up the proxy pods' addresses again (at most every 30 s) when :attr:`trusted_proxy_selector` is set;
        returns :meth:`trusted`. A failed lookup keeps the addresses known (or none: then no forwarded address is
        believed, and logins count under the proxy's address, the safe side)."""
        if self.trusted_proxy_selector and time.monotonic() - self._proxy_pods_at > 30:
            self._proxy_pods_at = time.monotonic()
            try:
                self._proxy_pods = tuple(await self.proxy_pod_addresses())
            except Exception as exc:  # noqa: BLE001 - the cluster's API: log it, keep what is known
                self.log.warning("labkit: cannot list the proxy pods (%s): %s", self.trusted_proxy_selector, exc)
        return self.trusted()

    async def proxy_pod_addresses(self) -> list[str]:
        """The addresses of the pods :attr:`trusted_proxy_selector` selects, in the hub's namespace (KubeSpawner's
        own client; the chart's hub role may list pods)."""
        from kubespawner.clients import load_config, shared_client

        namespace = (
            os.environ.get("POD_NAMESPACE") or open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read().strip()
        )
        load_config()
        pods = await shared_client("CoreV1Api").list_namespaced_pod(namespace, label_selector=self.trusted_proxy_selector)
        return [p.status.pod_ip for p in pods.items if p.status is not None and p.status.pod_ip]

    def instructor_names(self) -> set[str]:
        """The instructors' names (:attr:`instructors`, and any ``admin_users``) as the hub stores names (``Ingrid``
        in the settings is ``ingrid``)."""
        return {self.normalize_username(n) for n in (*self.instructors, *self.admin_users)}

    def is_approved(self, name: str) -> bool:
        """Whether ``name`` may use the hub now: an instructor, or an account an instructor approved."""
        name = self.normalize_username(name)
        if name in self.instructor_names():
            return True
        info = self.get_user(name)
        return bool(info is not None and info.is_authorized)

    async def refresh_user(self, user: Any, handler: Any = None) -> Any:
        """False (the hub then ends her login) for an account no longer approved; JupyterHub asks this every
        ``auth_refresh_age`` seconds and before every start (``refresh_pre_spawn``)."""
        return True if self.is_approved(user.name) else False

    async def pre_spawn_start(self, user: Any, spawner: Any) -> None:
        """Refuse to start a server for an account that is not approved (un-approved, or never approved)."""
        if not self.is_approved(user.name):
            raise web.HTTPError(403, f"{user.name} is not approved: an instructor approves accounts at /hub/authorize")
        await _maybe_await(super().pre_spawn_start(user, spawner))

    def name_clash(self, name: str) -> str | None:
        """Why ``name`` (normalised) may not be signed up for, or None: an instructor's name, or a look-alike of an
        instructor's or of an existing account's."""
        instructors = self.instructor_names()
        if name in instructors:
            return "an instructor's name"
        mine = skeleton(name)
        if any(skeleton(a) == mine for a in instructors):
            return "too like an instructor's name"
        if any(skeleton(info.username) == mine for info in UserInfo.all_users(self.db)):
            return "too like an existing account's name"
        return None

    # ------------------------------------------------------------------------------------------ sign-up

    def signup_problem(self, raw: str, password: str, confirmation: str, address: str, code: str = "") -> str | None:
        """The message refusing this sign-up, or None when it may go ahead."""
        wait = self.signups.retry_after(address)
        if wait:
            return f"Too many sign-ups from your address: try again in {int(wait) + 1} s."
        if self.signup_code and not hmac.compare_digest(code.strip().encode(), self.signup_code.strip().encode()):
            return "This sign-up needs the class's sign-up code: ask your instructor for it."
        name = normalize_name(raw)
        if not self.validate_username(name):
            return (
                "A user name is 1 to 32 characters: lower-case letters a-z, digits, '.', '_' or '-', starting with "
                "a letter or digit."
            )
        clash = self.name_clash(name)
        if clash is not None:
            self.log.warning("labkit: refused a sign-up as %r (%s)", raw, clash)
            return "This user name is already in use or not allowed: choose another."
        if password != confirmation:
            return "Your password did not match the confirmation. Please try again."
        if not self.is_password_strong(password):
            return f"Choose a password of at least {self.minimum_password_length} characters that is not a common one."
        if self.get_unauthed_amount_fast() >= self.max_pending:
            return "Too many sign-ups are waiting for approval: ask your instructor."
        return None

    def get_unauthed_amount_fast(self) -> int:
        return self.db.query(UserInfo).filter(UserInfo.is_authorized.is_(False)).count()

    def store_account(self, name: str, hashed: bytes) -> Any:
        """A pending account for ``name`` with an already computed bcrypt hash; None when the name is taken."""
        if self.user_exists(name) or self.name_clash(name) or not self.validate_username(name):
            return None
        info = UserInfo(username=name, password=hashed, is_authorized=False)
        self.db.add(info)
        self.db.commit()
        return info

    def change_password(self, username: str, new_password: str) -> Any:
        """NativeAuthenticator's, hashing with :attr:`bcrypt_rounds`: True when changed, None when refused (no such
        account, or a weak password)."""
        info = self.get_user(username)
        if info is None or not self.is_password_strong(new_password):
            return None
        info.password = hash_password(new_password, self.bcrypt_rounds)
        self.db.commit()
        return True

    def create_user(self, username: str, password: str, **kwargs: Any) -> Any:
        """A sign-up by NativeAuthenticator's own path: refused (None) for an instructor's name or a look-alike."""
        name = self.normalize_username(username)
        if self.name_clash(name):
            self.log.warning("labkit: refused a sign-up under the name %s", username)
            return None
        return super().create_user(name, password, **kwargs)

    # ------------------------------------------------------------------------------------------ logins

    def login_retry_after(self, handler: Any, username: str) -> float:
        """Seconds before this name may be tried again from this address; 0 when it may now.

        The per-address limit refuses only names that already failed from that address in the window: a class
        behind one NAT address, whose neighbour sprayed wrong passwords for made-up names, still logs in with the
        right passwords (each of the sprayed names gets one more guess at most), while the per-(name, address)
        limit stops guessing at one account."""
        address = client_address(handler, self.trusted())
        pair = (self.normalize_username(username), address)
        wait = self.pair_failures.retry_after(pair)
        if self.pair_failures.count(pair):
            wait = max(wait, self.address_failures.retry_after(address))
        return wait

    async def authenticate(self, handler: Any, data: dict[str, Any]) -> str | None:
        """The name when the password is right and the account approved; else None. Failures count per address and
        per (name, address), never per name alone; the check takes the same time whether the name exists or not."""
        name = self.normalize_username(str(data.get("username", "")))
        password = str(data.get("password", ""))
        address = client_address(handler, await self.refresh_trusted())
        if self.login_retry_after(handler, name):
            return None
        info = self.get_user(name) if self.validate_username(name) else None
        hashed = info.password if info is not None else None
        ok = await in_thread(check_password, password, hashed, self.bcrypt_rounds)
        if ok and info is not None and info.is_authorized and (not info.has_2fa or info.is_valid_token(data.get("2fa"))):
            self.pair_failures.clear((name, address))
            return name
        if ok and info is not None and not info.is_authorized and handler is not None:
            handler._labkit_unapproved = True
        self.address_failures.add(address)
        self.pair_failures.add((name, address))
        return None

    # ------------------------------------------------------------------------------------------ instructors

    def _made_by_config(self) -> set[str]:
        from sqlalchemy import text

        self.db.execute(text("CREATE TABLE IF NOT EXISTS labkit_instructor_accounts (username TEXT PRIMARY KEY)"))
        self.db.commit()
        return {r[0] for r in self.db.execute(text("SELECT username FROM labkit_instructor_accounts"))}

    def _record_made(self, name: str) -> None:
        from sqlalchemy import text

        self.db.execute(text("INSERT OR IGNORE INTO labkit_instructor_accounts (username) VALUES (:n)"), {"n": name})
        self.db.commit()

    def ensure_instructor_accounts(self) -> list[str]:
        """Make the missing instructors' accounts, approved, and record that the configuration made them; returns
        the names made. An instructor name whose account the configuration did not make raises
        :class:`InstructorNameTaken` (the hub does not start); a password NativeAuthenticator refuses (too short, too
        common) stops the hub with a message, rather than leaving the admin without a login."""
        made = []
        ours = self._made_by_config()
        for name in sorted(self.instructor_names()):
            info = self.get_user(name)
            if info is not None:
                if name in ours:
                    continue
                # an account from before this record existed, made with the configuration's password: the
                # configuration's own (whoever else knows that password is an instructor anyway)
                if self.instructor_password and check_password(self.instructor_password, info.password, self.bcrypt_rounds):
                    if not info.is_authorized:
                        info.is_authorized = True
                        self.db.commit()
                    self._record_made(name)
                    continue
                raise InstructorNameTaken(
                    f"labkit: the instructor name {name!r} (LABKIT_INSTRUCTORS) already belongs to an account someone "
                    f"signed up for ({'approved' if info.is_authorized else 'waiting for approval'}); the configuration "
                    "did not make it, so the hub will not make it an admin. Do not approve it. Remove that account: take "
                    f"{name!r} out of LABKIT_INSTRUCTORS, start the hub, delete the user {name!r} at /hub/admin (or "
                    f"discard it at /hub/authorize), then put the name back; or choose another instructor name."
                )
            if not self.instructor_password:
                self.log.warning("labkit: instructor %s has no account and LABKIT_ADMIN_PASSWORD is not set", name)
                continue
            if not self.is_password_strong(self.instructor_password):
                raise ValueError(
                    f"LABKIT_ADMIN_PASSWORD is refused: at least {self.minimum_password_length} characters, and "
                    "not a common password"
                )
            if not self.validate_username(name):
                raise ValueError(
                    f"the instructor name {name!r} is not a valid user name: lower-case letters, digits, "
                    "'.', '_' or '-' (LABKIT_INSTRUCTORS)"
                )
            info = UserInfo(
                username=name, password=hash_password(self.instructor_password, self.bcrypt_rounds), is_authorized=True
            )
            self.db.add(info)
            self.db.commit()
            self._record_made(name)
            self.log.info("labkit: made the instructor account %s", name)
            made.append(name)
        return made

    def get_user(self, username: str) -> Any:
        """The account, read afresh: an approval at /hub/authorize is written through the request's database
        session, and without a refresh this one would still see the account unapproved (the learner could not log in)."""
        info = super().get_user(username)
        if info is not None:
            self.db.refresh(info)
        return info

    def get_handlers(self, app: Any) -> list[tuple[str, Any]]:
        """NativeAuthenticator's pages, with this module's login, sign-up, approval, discard and password
        handlers, and ``/discard-pending``."""
        handlers = [(path, _HANDLERS.get(path, handler)) for path, handler in super().get_handlers(app)]
        return [*handlers, (r"/discard-pending", CourseDiscardPendingHandler)]
