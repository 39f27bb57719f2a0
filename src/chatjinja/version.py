"""The version of chatjinja (the one place it is written in the package; pyproject.toml holds the same)."""

__version__ = "0.1.0"
