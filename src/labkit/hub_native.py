"""The course's own logins on the hub: NativeAuthenticator with the instructors' accounts made by the configuration.

Learners sign up at ``/hub/signup`` (a password of at least :data:`labkit.hub_setup.MIN_PASSWORD` characters, not a
common one) and can log in once an instructor has approved them at ``/hub/authorize``. The instructors (the hub's
``admin_users``) get their accounts when the hub starts, with :attr:`CourseNativeAuthenticator.instructor_password`
(``LABKIT_ADMIN_PASSWORD``), already approved; an existing account keeps its password (change it at
``/hub/change-password``). Nobody can sign up under an instructor's name, so a learner who signs up first cannot
become an admin (plain NativeAuthenticator approves any sign-up whose name is in ``admin_users``).

NativeAuthenticator 1.3's login form no longer works on JupyterHub 6 as it is (it times the login with the hub's
``statsd`` client, which JupyterHub 6 removed: every login through the form answered 500); :class:`CourseLoginHandler`
is its handler without that timer.

This module imports ``nativeauthenticator``: only the hub's configuration imports it.
"""

from __future__ import annotations

from typing import Any

from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.handlers import LoginHandler as NativeLoginHandler
from traitlets import Unicode


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
    """NativeAuthenticator's login form, working on JupyterHub 5 and 6 (no statsd; the error page's extra keywords)."""

    @property
    def statsd(self) -> Any:
        """The hub's statsd client where it has one (JupyterHub 5), else a stand-in that does nothing (6)."""
        real = self.settings.get("statsd")
        return real if real is not None else _NoStatsd()

    def _render(self, login_error: str | None = None, username: str | None = None, **_: Any) -> Any:
        return super()._render(login_error=login_error, username=username)


class CourseNativeAuthenticator(NativeAuthenticator):
    """NativeAuthenticator whose admin accounts come from the configuration, never from the sign-up form."""

    instructor_password = Unicode(
        "",
        config=True,
        help="The first password of each instructor's account (made when the hub starts, if it does not exist yet).",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ensure_instructor_accounts()

    def ensure_instructor_accounts(self) -> list[str]:
        """Make the missing instructors' accounts, approved; returns the names made. A password NativeAuthenticator
        refuses (too short, too common) stops the hub with a message, rather than leaving the admin without a login."""
        made = []
        for name in sorted(self.admin_users):
            if self.user_exists(name):
                info = self.get_user(name)
                if not info.is_authorized:  # e.g. a name made an instructor after a learner signed up with it
                    self.log.warning("labkit: %s is an instructor but their account was never approved; approve it at "
                                     "/hub/authorize if it is really theirs", name)
                continue
            if not self.instructor_password:
                self.log.warning("labkit: instructor %s has no account and LABKIT_ADMIN_PASSWORD is not set", name)
                continue
            if not self.is_password_strong(self.instructor_password):
                raise ValueError(f"LABKIT_ADMIN_PASSWORD is refused: at least {self.minimum_password_length} characters, and "
                                 "not a common password")
            if super().create_user(name, self.instructor_password) is None:
                raise ValueError(f"could not make the instructor account {name!r} (is the name valid?)")
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
        """NativeAuthenticator's pages, with :class:`CourseLoginHandler` for ``/login``."""
        return [(path, CourseLoginHandler if path == r"/login" else handler) for path, handler in super().get_handlers(app)]

    def create_user(self, username: str, password: str, **kwargs: Any) -> Any:
        """A sign-up: refused (None) for an instructor's name; otherwise NativeAuthenticator's, waiting for approval."""
        if self.normalize_username(username) in self.admin_users:
            self.log.warning("labkit: refused a sign-up under the instructor name %s", username)
            return None
        return super().create_user(username, password, **kwargs)
