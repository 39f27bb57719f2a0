"""The variables every render context has (the name resolution itself is ``collect._Index``'s walk, on ``syntax.visitor``)."""

from __future__ import annotations

__all__ = ["FIXED_VARIABLES"]

# What apply_chat_template always passes; ``variables`` lists the others.
FIXED_VARIABLES = frozenset({"messages", "tools", "documents", "add_generation_prompt"})
