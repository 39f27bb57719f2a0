"""transformers' reply parser (``transformers.utils.chat_parsing``), imported on first use: the ``parse`` extra is optional."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ChatJinjaError

__all__ = ["ParseExtraMissing", "parser_module"]


class ParseExtraMissing(ChatJinjaError, ImportError):
    """transformers (the ``chatjinja[parse]`` extra) is not installed."""


def parser_module() -> Any:
    """``transformers.utils.chat_parsing`` (5.24.x or 5.25.x: its ``ResponseParser`` is what this module drives).

    transformers' advice that PyTorch is missing (the parser needs no torch) is kept off stderr: the
    variable that silences it is set for the import only.
    """
    previous = os.environ.get(_ADVISORY)
    os.environ[_ADVISORY] = "1"
    try:
        from transformers.utils import chat_parsing  # lazy: the parse extra is optional (and costs 0.8 s to import)
    except ImportError:
        raise ParseExtraMissing(
            "reading replies needs transformers' parser: pip install 'chatjinja[parse]'") from None
    finally:
        if previous is None:
            os.environ.pop(_ADVISORY, None)
        else:
            os.environ[_ADVISORY] = previous
    return chat_parsing


_ADVISORY = "TRANSFORMERS_NO_ADVISORY_WARNINGS"
