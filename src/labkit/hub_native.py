"""The course's own logins on the hub: NativeAuthenticator with the instructors' accounts made by the configuration.

Learners sign up at ``/hub/signup`` (a password of at least :data:`labkit.hub_setup.MIN_PASSWORD` characters, not a
common one) and can log in once an instructor has approved them at ``/hub/authorize``. The instructors (the hub's
``admin_users``) get their accounts when the hub starts, with :attr:`CourseNativeAuthenticator.instructor_password`
(``LABKIT_ADMIN_PASSWORD``), already approved; an existing account keeps its password (change it at
``/hub/change-password``). Nobody can sign up under an instructor's name, so a learner who signs up first cannot
become an admin (plain NativeAuthenticator approves any sign-up whose name is in ``admin_users``).

This module imports ``nativeauthenticator``: only the hub's configuration imports it.
"""

from __future__ import annotations

from typing import Any

from nativeauthenticator import NativeAuthenticator
from traitlets import Unicode


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

    def create_user(self, username: str, password: str, **kwargs: Any) -> Any:
        """A sign-up: refused (None) for an instructor's name; otherwise NativeAuthenticator's, waiting for approval."""
        if self.normalize_username(username) in self.admin_users:
            self.log.warning("labkit: refused a sign-up under the instructor name %s", username)
            return None
        return super().create_user(username, password, **kwargs)
