"""transformers' reply parser (``transformers.utils.chat_parsing``), imported on first use: the ``parse`` extra is optional."""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..errors import ChatJinjaError

__all__ = ["ParseExtraMissing", "parser_module"]


class ParseExtraMissing(ChatJinjaError, ImportError):
    """transformers or regex (the ``chatjinja[parse]`` extra) is not installed."""


class _NoTorchAdvice(logging.Filter):
    """Drops transformers' advice that PyTorch is missing (the parser needs no torch)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "PyTorch was not found" not in record.getMessage()


_import_lock = threading.Lock()


def parser_module() -> Any:
    """``transformers.utils.chat_parsing`` (5.24.x or 5.25.x), which derivation checks each candidate template with.

    Importing transformers without torch logs, once, the advice that PyTorch was not found, on the
    ``transformers`` logger (its own stderr handler). The import runs with a filter on that logger
    that drops this one record: nothing else is hidden, and the process's environment is left as it
    is (setting ``TRANSFORMERS_NO_ADVISORY_WARNINGS`` around the import silenced it by changing
    ``os.environ``, which other threads read).
    """
    advice = _NoTorchAdvice()
    logger = logging.getLogger("transformers")
    with _import_lock:
        logger.addFilter(advice)
        try:
            from transformers.utils import chat_parsing  # lazy: the parse extra is optional (and costs 0.8 s to import)
        except ImportError:
            raise ParseExtraMissing(
                "deriving a response template needs transformers' parser: pip install 'chatjinja[parse]'") from None
        finally:
            logger.removeFilter(advice)
    return chat_parsing
