"""The hostile calls of "one budget per call", each run through the command line in a fresh process.

``run_in_fresh_process(case, workdir)`` writes the case's files, runs ``chatjinja generation-tags`` or
``chatjinja render --batch --tokenize`` in a new interpreter (``cli.main``, in-process there) under a
hard address-space limit, and returns the exit code, stderr, the output's start, the child's peak RSS
(``VmHWM``) and its wall time. ``tests/training/test_call_budgets.py`` asserts the outcome and the peak;
``benchmarks/bench_call_budgets.py`` prints the times.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from tests.work import SRC, cli_in_fresh_process

#: the child's address space: a regression fails there with MemoryError, it cannot take the machine down
ADDRESS_SPACE = 6 << 30
#: what a case may peak at (the acceptance bound of the issue)
PEAK_BYTES = 768 << 20

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
INST = ("{{- bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}[INST]{{ message['content'] }}[/INST]"
        "{% else %}{{ message['content'] }}{{ eos_token }}{% endif %}{% endfor %}")

#: a template printing 32 MB per render (under the 32 Mi output cap), 4 MB per render, and one render taking about 1 s
TEMPLATES = {
    "prints_32mb": "{% for i in range(2) %}{{ 'x' * 16000000 }}{% endfor %}" + CHATML,
    "prints_4mb": "{{ 'x' * 4000000 }}" + CHATML,
    "slow_render": "{% set ns = namespace(n=0) %}{% for i in range(50000) %}{% for j in range(6) %}{% set ns.n = ns.n + j %}"
                   "{% endfor %}{% endfor %}" + CHATML,
}
#: characters of the message the tokenize cases render
TOKENIZE_CHARS = {"tokenize_20mb": 20_000_000, "tokenize_at_limit": (512 << 10) - 64}
CASES = (*TEMPLATES, *TOKENIZE_CHARS)


def tekken_folder(folder: Path) -> Path:
    """mistral-common's tekken vocabulary (131,072 tokens), converted by transformers and saved (as tests/training/conftest.py does)."""
    import mistral_common
    from transformers.integrations.mistral.tokenizer import convert_tekken_tokenizer

    tokenizer = convert_tekken_tokenizer(str(Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"),
                                         chat_template="{{ '' }}")
    tokenizer.save_pretrained(str(folder))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


def _words(chars: int, seed: int = 0) -> str:
    """Prose-like text of ``chars`` characters (some of them not ASCII)."""
    rng = random.Random(seed)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "tokenizer", "budget", "memory",
             "conversation", "assistant", "hello", "world", "données", "東京", "\U0001f642"]
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(words)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def _digits(chars: int, seed: int = 0) -> str:
    """Digits: one token each in tekken, the most memory a byte measured."""
    rng = random.Random(seed)
    return "".join(rng.choice("0123456789") for _ in range(chars))


def arguments(case: str, workdir: Path, tokenizer: Path | None = None) -> list[str]:
    """The command line of ``case``, its files written into ``workdir``."""
    if case in TEMPLATES:
        template = workdir / f"{case}.jinja"
        template.write_text(TEMPLATES[case], encoding="utf-8")
        return ["generation-tags", str(template), "-o", str(workdir / f"{case}.out")]
    assert tokenizer is not None
    template = workdir / "inst.jinja"
    template.write_text(INST, encoding="utf-8")
    chars = TOKENIZE_CHARS[case]
    text = _words(chars) if case == "tokenize_20mb" else _digits(chars)
    batch = workdir / f"{case}.jsonl"
    batch.write_text(json.dumps({"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]},
                                ensure_ascii=False) + "\n", encoding="utf-8")
    return ["render", str(template), "--batch", str(batch), "--tokenize", "--tokenizer", str(tokenizer),
            "-o", str(workdir / f"{case}.out")]


def run_in_fresh_process(case: str, workdir: Path, tokenizer: Path | None = None, src: Path = SRC) -> dict:
    """Run ``case`` through ``cli.main`` in a new interpreter: ``{"code", "stderr", "output", "peak", "seconds"}``."""
    result = cli_in_fresh_process(arguments(case, workdir, tokenizer), src=src, address_space=ADDRESS_SPACE, timeout=600)
    children = result.pop("children_peak")
    if result["peak"] is not None:
        result["peak"] = max(result["peak"], children)
    out = workdir / f"{case}.out"
    result["output"] = out.read_text(encoding="utf-8", errors="replace")[:400] if result["code"] is not None and out.exists() else ""
    return result
