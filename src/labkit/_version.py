"""labkit's version (the package root and `labkit doctor` report it; pyproject.toml gives the same)."""

__version__ = "0.1.0"
