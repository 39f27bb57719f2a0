"""The parameters of transformers' ``apply_chat_template``: one table for both halves (the runtime passes
them as transformers does; the analyser never takes one for a template's mode variable)."""

from __future__ import annotations

__all__ = ["PARAMETER_VARIABLES", "TOKENIZE_PARAMETERS", "TRANSFORMERS_PARAMETERS", "UNPASSABLE_VARIABLES"]

#: the template variables that are parameters of transformers' ``apply_chat_template``: passed as such
#: (``tools=...``), never in ``variables=``; an input JSON object or batch record key of one of these names
#: is that parameter
PARAMETER_VARIABLES = ("tools", "documents", "add_generation_prompt", "continue_final_message", "chat_template")

#: the tokenizing parameters of transformers' ``apply_chat_template``: parameters of chatjinja's too,
#: never template variables (a batch record or input object cannot set them: they are the call's)
TOKENIZE_PARAMETERS = (
    "tokenize",
    "sanitize_control_tokens",
    "padding",
    "truncation",
    "max_length",
    "return_tensors",
    "return_dict",
    "return_assistant_tokens_mask",
    "tokenizer_kwargs",
)

#: every named parameter of transformers 5.25.0's ``apply_chat_template`` chatjinja takes (``conversation`` aside)
TRANSFORMERS_PARAMETERS = PARAMETER_VARIABLES + TOKENIZE_PARAMETERS

#: names a caller cannot pass to a template through transformers at all: ``apply_chat_template``'s own
#: ``self`` and ``conversation``, and ``render_jinja_template``'s ``conversations`` (each a ``TypeError``)
UNPASSABLE_VARIABLES = ("self", "conversation", "conversations")
