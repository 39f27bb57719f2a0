"""Coverage-guided fuzzing of the renderer with atheris: arbitrary bytes as a template and a conversation.

Not run in CI. To run (Linux, CPython 3.11; atheris ships wheels for it):

    .venv/bin/pip install atheris
    .venv/bin/python fuzz/fuzz_render.py -max_total_time=600 -rss_limit_mb=1024 -timeout=5 fuzz/corpus

``fuzz/corpus`` may start empty (or be seeded with ``cp tests/security/payloads/*.jinja fuzz/corpus/``).
The first half of the input is the template, the rest a JSON conversation (invalid JSON falls back
to one user message). A finding is any exception outside the documented set (see SECURITY.md and
``tests/runtime/test_fuzz.py``), a render over the output budget, a crash, a timeout (libFuzzer's
``-timeout``, well above the render budget of 1 s) or an out-of-memory (``-rss_limit_mb``).
"""

from __future__ import annotations

import json
import sys

import atheris

with atheris.instrument_imports():
    import jinja2

    from chatjinja import BudgetExceeded, apply_chat_template
    from chatjinja.runtime.budget import DEFAULT_BUDGETS

DOCUMENTED = (jinja2.TemplateError, ValueError, TypeError, AttributeError, ArithmeticError, LookupError, SyntaxError, RuntimeError)
FALLBACK = [{"role": "user", "content": "hi"}]


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    template = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 4096))
    strict = fdp.ConsumeBool()
    try:
        conversation = json.loads(fdp.ConsumeUnicodeNoSurrogates(4096))
        if not isinstance(conversation, list) or not conversation or not all(isinstance(m, dict) for m in conversation):
            conversation = FALLBACK
    except (ValueError, RecursionError):
        conversation = FALLBACK
    try:
        text = apply_chat_template(conversation, template, strict=strict, bos_token="<s>", eos_token="</s>")
    except RecursionError:
        raise  # never a documented outcome
    except BudgetExceeded:
        return
    except DOCUMENTED:
        return
    if len(text) > DEFAULT_BUDGETS.max_output_chars:
        raise AssertionError(f"output of {len(text)} characters passed the output budget")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
