"""Puts labkit's simulator under every Python process of numba-cuda's test suite (tools/numba_peer.py).

Python imports ``sitecustomize`` at start-up from ``PYTHONPATH``; the peer comparison puts this folder there for both
of its runs (for :mod:`peer_plugin`), and sets ``LABKIT_PEER_ENGINE=1`` for the run with labkit's engine. Subprocesses
that the suite starts inherit both, so labkit is active in each of them too, as ``labkit.setup("sim")`` in a notebook.
"""

import os

if os.environ.get("LABKIT_PEER_ENGINE") == "1":
    import labkit

    labkit.setup("sim", quiet=True)
