"""``python -m labkit.cli ...``: the ``labkit`` command."""

import os
import sys

from labkit.cli import main

os.environ.setdefault("PYTHONUNBUFFERED", "1")
sys.exit(main())
