"""Notebook trust in a learner's server under the hub: no notebook is ever trusted there.

Jupyter runs the scripts in a notebook's stored HTML and JavaScript outputs only when the notebook is *trusted*: its
signature, an HMAC made with the notary's secret, is in the notary's database. Both live in the learner's home
(``~/.local/share/jupyter``), so a learner can sign any notebook she writes (``jupyter trust``, or
``nbformat.sign.NotebookNotary().sign(nb)`` in her kernel), and whoever then opened it in her server ran her script
(finding R4-1 of the fourth red team). A learner's server started by the hub uses
:class:`UntrustingContentsManager` (``--ServerApp.contents_manager_class``, set by
:func:`labkit.hub_setup.configure_origins`, never from the learner's own configuration): its notary has no secret
and no database anyone can write, trusts nothing it reads, and signs nothing it saves. Outputs a learner's own
kernel produces in her open notebook still display (they come from her session, not from the file); stored
HTML outputs are shown sanitised, without scripts, when a notebook is opened again. Self-paced ``labkit lab`` keeps
Jupyter's ordinary trust.

This module imports ``jupyter_server`` and ``nbformat``: only a learner's single-user server loads it.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from nbformat.sign import MemorySignatureStore, NotebookNotary
from traitlets import default

__all__ = ["NeverTrustNotary", "UntrustingContentsManager"]


class NeverTrustNotary(NotebookNotary):
    """A notary that trusts no notebook and signs none: no secret file, an in-memory store nobody fills."""

    @default("store_factory")
    def _store_factory_default(self) -> Any:
        return MemorySignatureStore

    @default("secret")
    def _secret_default(self) -> bytes:
        return b""  # never read from, never written to, the learner's home

    def check_signature(self, nb: Any) -> bool:
        """Never trusted."""
        return False

    def sign(self, nb: Any) -> None:
        """Signs nothing (``jupyter trust`` through the server's API included)."""
        return None

    def mark_cells(self, nb: Any, trusted: bool) -> None:
        """Every cell untrusted, whatever the caller asked."""
        super().mark_cells(nb, False)


class UntrustingContentsManager(AsyncLargeFileManager):
    """jupyter_server's default contents manager with :class:`NeverTrustNotary`."""

    @default("notary")
    def _notary_default(self) -> NotebookNotary:
        return NeverTrustNotary(parent=self)
