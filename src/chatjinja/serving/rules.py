"""The RP codes: a reply the template writes that its derived response template cannot read back (reported by ``chatjinja check``).

The round trip needs renders and transformers' parser, so RP never runs under ``lint`` (the static
half); ``check`` runs it on each template it loads (docs/design.md). This module holds the table only
(``chatjinja rules`` lists it without loading the runtime); ``derive.reply_problems`` finds them.
"""

from __future__ import annotations

from ..lint.rule import Rule

__all__ = ["REPLY_RULES"]

_BAD = ("{%- for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
        "{%- for c in m.get('tool_calls', []) %}{{ c['function']['name'] }}{{ c['function']['arguments'] }}{%- endfor %}"
        "<|end|>{%- endfor %}{%- if add_generation_prompt %}<|assistant|>{%- endif %}")
_GOOD = ("{%- for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
         "{%- for c in m.get('tool_calls', []) %}<tool_call>{{ {'name': c['function']['name'], "
         "'arguments': c['function']['arguments']} | tojson }}</tool_call>{%- endfor %}"
         "<|end|>{%- endfor %}{%- if add_generation_prompt %}<|assistant|>{%- endif %}")



REPLY_RULES: tuple[Rule, ...] = (
    Rule("RP001", "unreadable-reply", "warning", "A reply the template writes cannot be read back into its message", (
        "## What it does\nRenders the message suite (content; reasoning with content; one call with object and with\n"
        "string arguments; two parallel calls; nested JSON and unicode arguments; content with a call) as the\n"
        "reply after the generation prompt, derives the template's response template, and reports the first\n"
        "message shape whose reply transformers' parser cannot read back to the message, with why.\n\n"
        "## Why is this bad?\nA server reads the model's output with a response template: when what the template\n"
        "writes cannot be split back into content, reasoning and typed tool calls, every stack needs a hand-written\n"
        "parser for it, and a call written without markers (here: a Python repr glued to the content) is read as\n"
        "text.\n\n"
        "## Example\n`chat_template.jinja`:\n```jinja\n" + _BAD + "\n```\n\n"
        "## Use instead\nMark each call and write it as JSON:\n\n`chat_template.jinja`:\n```jinja\n" + _GOOD + "\n```\n\n"
        "## Fix safety\nNo fix: the reply format is what the model was trained on.\n")),
)
