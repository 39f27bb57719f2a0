"""The ``tokenizers`` library, imported on first use: the ``tokenize`` extra is optional and the text render never needs it."""

from __future__ import annotations

from typing import Any

__all__ = ["INSTALL", "tokenizers_module"]

INSTALL = "tokenizing needs the tokenizers library: pip install 'chatjinja[tokenize]'"


def tokenizers_module() -> Any:
    """The ``tokenizers`` library, or an ``ImportError`` saying which extra installs it."""
    try:
        import tokenizers  # lazy: the tokenize extra is optional; the text render never needs it
    except ImportError:
        raise ImportError(INSTALL) from None
    return tokenizers
