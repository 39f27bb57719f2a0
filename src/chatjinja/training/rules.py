"""The TR codes: properties a trainer checks before it trusts a template's training data (reported by ``chatjinja check``).

They need renders (``training/properties.py`` measures them), so TR never runs under ``lint`` (the
static half); ``check`` runs them on each template it loads. This module holds the table only
(``chatjinja rules`` lists it without loading the runtime); ``properties.property_problems`` finds them.
"""

from __future__ import annotations

from ..lint.rule import Rule

__all__ = ["TRAINING_RULES"]

_TAIL = "{%- endfor %}{%- if add_generation_prompt %}<|assistant|>{%- endif %}"
_PREFIX_BAD = ("{%- for m in messages %}<|{{ m['role'] }}|>"
               "{%- if m['reasoning_content'] is defined and loop.last %}<think>{{ m['reasoning_content'] }}</think>{%- endif %}"
               "{{ m['content'] }}<|end|>" + _TAIL)
_PREFIX_GOOD = ("{%- for m in messages %}<|{{ m['role'] }}|>"
                "{%- if m['reasoning_content'] is defined %}<think>{{ m['reasoning_content'] }}</think>{%- endif %}"
                "{{ m['content'] }}<|end|>" + _TAIL)
_STOP_BAD = ("{%- for m in messages %}<|{{ m['role'] }}|>{%- if m['role'] == 'assistant' %}"
             "{% generation %}{{ m['content'] }}{% endgeneration %}{%- else %}{{ m['content'] }}{%- endif %}<|end|>" + _TAIL)
_STOP_GOOD = ("{%- for m in messages %}<|{{ m['role'] }}|>{%- if m['role'] == 'assistant' %}"
              "{% generation %}{{ m['content'] }}<|end|>{% endgeneration %}{%- else %}{{ m['content'] }}<|end|>{%- endif %}"
              + _TAIL)
_ROLES_BAD = "{%- for m in messages %}{% generation %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endgeneration %}" + _TAIL


def _page(what: str, why: str, bad: str, instead: str, good: str) -> str:
    return (f"## What it does\n{what}\n\n## Why is this bad?\n{why}\n\n"
            f"## Example\n`chat_template.jinja`:\n```jinja\n{bad}\n```\n\n"
            f"## Use instead\n{instead}\n\n`chat_template.jinja`:\n```jinja\n{good}\n```\n\n"
            "## Fix safety\nNo fix: the template's text is what the model was (or will be) trained on.\n")


TRAINING_RULES: tuple[Rule, ...] = (
    Rule("TR001", "prefix-not-preserved", "warning", "Adding a message changes the text rendered before it", _page(
        "Renders every prefix of a few conversations (chat; system; a tool call and its result; an assistant\n"
        "reply with reasoning) and reports the first conversation and position where the render of the first\n"
        "`k` messages is not the start of the render of the first `k + 1` (with or without the generation\n"
        "prompt), with the text that changed. TRL's `is_chat_template_prefix_preserving` checks one of these\n"
        "pairs (the tool call and its result).",
        "Multi-turn RL and KV-cache reuse extend a conversation in place: the tokens already generated or\n"
        "cached must stay the tokens of the longer conversation. A template that drops earlier reasoning, moves\n"
        "the system prompt into the last user turn, or ends the final turn differently from the others trains\n"
        "(and serves) on text the model never saw while it generated. Often deliberate (reasoning models drop\n"
        "old reasoning); then the trainer has to render each turn on its own.",
        _PREFIX_BAD, "Write each message the same whatever follows it:", _PREFIX_GOOD)),
    Rule("TR002", "end-of-turn-untrained", "warning", "The assistant's end-of-turn token lies outside the assistant mask", _page(
        "Renders an assistant turn followed by a user message with the template's `{% generation %}` tags and\n"
        "reports when the last non-whitespace text inside the assistant's spans is the message content rather\n"
        "than what the template writes after it (the end-of-turn token). TRL's `is_chat_template_stop_token_trained`\n"
        "checks the same with a tokenizer (the last masked token must be an added token). Templates without\n"
        "generation tags have no assistant mask and are not checked.",
        "With `return_assistant_tokens_mask=True` only the masked tokens carry loss: when the end-of-turn token\n"
        "is outside the span, the model never learns to stop and generates past its turn (axolotl issue 3754:\n"
        "Gemma's `<end_of_turn>` was never trained).",
        _STOP_BAD, "Close the generation block after the end-of-turn token:", _STOP_GOOD)),
    Rule("TR003", "non-assistant-trained", "warning", "The assistant mask covers system, user or tool text", _page(
        "Renders conversations whose system, user and tool messages hold marker texts, with the template's\n"
        "`{% generation %}` tags, and reports the roles whose content lies inside a generation span.\n"
        "Templates without generation tags are not checked.",
        "Tokens inside the mask carry loss: the model is trained to write the user's (or the tool's) part of\n"
        "the conversation, which it must only read.",
        _ROLES_BAD, "Put only the assistant's reply (and its end-of-turn token) inside the generation block:", _STOP_GOOD)),
)
