"""Wall time, CPU time and peak RSS of the static half on the attack payloads of ``tests/analysis/test_static_budgets.py``.

    .venv/bin/python benchmarks/bench_static_budgets.py [--lint] [--only SUBSTRING]

Each payload runs in a fresh process (``chatjinja.analyze``, or with ``--lint`` ``chatjinja.lint.lint``)
under a 4 GiB address-space limit and a 120 s guard; the child reports the time of the call alone (wall
and CPU), its peak RSS (``ru_maxrss``, the interpreter and the import included) and the outcome (``ok``
and ``refused`` as in the test, or the limit or error that stopped it; for ``lint`` the codes it
reported, ``LN003`` when the template is beyond the source limits). Then ``LINT_SHAPES``:
templates of up to 1 MiB (the source limit) made of the shapes that cost a linter most (statements,
outputs, findings, suppressions, branches, long lines, deep operator chains), each at 1 MiB (past the
token limit, so they time the refusal) and cut to the most tokens the static half reads
(``MAX_SOURCE_TOKENS``, the slowest templates it accepts). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

MIB = 1024 * 1024


def _fill(unit: str, limit: int = MIB) -> str:
    return unit * (limit // len(unit))


def _numbered(template: str, limit: int = MIB) -> str:
    pieces, size, i = [], 0, 0
    while size + len(template.format(i=i)) <= limit:
        pieces.append(template.format(i=i))
        size += len(pieces[-1])
        i += 1
    return "".join(pieces)


def _tokens(text: str) -> int:
    from chatjinja.syntax.parser import _parser

    return sum(len(chunk) for chunk in _parser()[2].lexer.chunks(text))


def _at_token_limit(unit: str, numbered: bool = False) -> str:
    """As many ``unit`` as fit within ``MAX_SOURCE_TOKENS`` (and 1 MiB): the largest template of that shape the static half reads."""
    from chatjinja.limits import MAX_SOURCE_TOKENS

    def build(count: int) -> str:
        return "".join(unit.format(i=i) for i in range(count)) if numbered else unit * count

    low, high = 0, MAX_SOURCE_TOKENS  # the most units that fit: at least low, fewer than high
    while high - low > 1:
        middle = (low + high) // 2
        text = build(middle)
        low, high = (middle, high) if len(text) <= MIB and _tokens(text) <= MAX_SOURCE_TOKENS else (low, middle)
    return build(low)


# name -> Python expression (evaluated in the child, with _fill, _numbered and _at_token_limit) building a
# template of at most 1 MiB: the 1 MiB rows are past the token limit (each stops there), the "100k tokens"
# rows are the same shapes cut to the most the static half reads
LINT_SHAPES: dict[str, str] = {
    "1 MiB: set + output lines (68k findings)": '_fill("{% set x = messages[0].content %}{{ x|trim }}\\n")',
    "1 MiB: one line of 37k outputs": '_fill("{{ messages[0][\'content\'] }}")',
    "1 MiB: leaking layout (55k findings)": '_fill("{% for m in messages %}\\n    {{ m.content }}\\n{% endfor %}\\n")',
    "1 MiB: suppressed lines (12k suppressions)": (
        '_fill("{% for m in messages %}\\n    {{ m.content }} {# chatjinja: ignore[WS001] #}\\n{% endfor %}\\n")'),
    "1 MiB: 14k flat ifs": '_fill("{% if messages[0].role == \'user\' %}{{ messages[0].content }}{% endif %}\\n")',
    "1 MiB: 10k distinct macros": '_numbered("{{% macro m{i}(x) %}}{{{{ x }}}}{{% endmacro %}}{{{{ m{i}(messages[0].content) }}}}\\n")',
    "1 MiB: operator chains 170 deep": '_fill("{{ 1" + " + 1" * 170 + " }}\\n")',
    "1 MiB: blocks nested 40 deep": '_fill("{% if messages %}" * 40 + "{{ messages[0].content }}" + "{% endif %}" * 40 + "\\n")',
    "1 MiB: one text line": '"{{ bos_token }}" + "a" * (MIB - 100)',
    "100k tokens: set + output lines": '_at_token_limit("{% set x = messages[0].content %}{{ x|trim }}\\n")',
    "100k tokens: one line of outputs": '_at_token_limit("{{ messages[0][\'content\'] }}")',
    "100k tokens: leaking layout": '_at_token_limit("{% for m in messages %}\\n    {{ m.content }}\\n{% endfor %}\\n")',
    "100k tokens: suppressed lines": (
        '_at_token_limit("{% for m in messages %}\\n    {{ m.content }} {# chatjinja: ignore[WS001] #}\\n{% endfor %}\\n")'),
    "100k tokens: flat ifs": '_at_token_limit("{% if messages[0].role == \'user\' %}{{ messages[0].content }}{% endif %}\\n")',
    "100k tokens: distinct macros": (
        '_at_token_limit("{{% macro m{i}(x) %}}{{{{ x }}}}{{% endmacro %}}{{{{ m{i}(messages[0].content) }}}}\\n", True)'),
    "100k tokens: operator chains 170 deep": '_at_token_limit("{{ 1" + " + 1" * 170 + " }}\\n")',
    "100k tokens: blocks nested 40 deep": (
        '_at_token_limit("{% if messages %}" * 40 + "{{ messages[0].content }}" + "{% endif %}" * 40 + "\\n")'),
}

_CHILD = r"""
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
sys.path.insert(0, {repo!r})
sys.path.insert(0, {here!r})
sys.path.insert(0, {repo!r} + "/src")  # this checkout's chatjinja
from bench_static_budgets import LINT_SHAPES, MIB, _fill, _numbered, _at_token_limit
from tests.analysis.test_static_budgets import PAYLOADS
source = PAYLOADS[{name!r}][0] if {name!r} in PAYLOADS else eval(LINT_SHAPES[{name!r}])
import chatjinja
from chatjinja.lint import lint
chatjinja.analyze("{{{{ x }}}}")  # the grammar built before the clock starts
lint("{{{{ x }}}}")
started, cpu = time.perf_counter(), time.process_time()
try:
    if {lint!r}:
        outcome = ",".join(sorted({{d.code for d in lint(source)}})) or "clean"
    else:
        outcome = "ok" if chatjinja.analyze(source).content_string else "refused"
except BaseException as exc:
    outcome = getattr(exc, "limit", None) or type(exc).__name__
elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps([outcome, elapsed, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))
"""


def measure(name: str, lint: bool) -> tuple[str, float | None, float | None, int | None]:
    code = _CHILD.format(repo=str(REPO), here=str(HERE), name=name, lint=lint)
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    except subprocess.TimeoutExpired:
        return "over 120 s (stopped)", None, None, None
    if result.returncode != 0 or not result.stdout.strip():
        return f"died (exit {result.returncode})", None, None, None
    outcome, elapsed, cpu, rss_kib = json.loads(result.stdout.strip().splitlines()[-1])
    return outcome, elapsed, cpu, rss_kib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lint", action="store_true", help="time chatjinja.lint.lint instead of chatjinja.analyze")
    parser.add_argument("--only", default="", help="only the payloads whose name contains this")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.analysis.test_static_budgets import PAYLOADS

    what = "lint" if args.lint else "analyze"
    rows = [(name, expected) for name, (_source, expected) in PAYLOADS.items()]
    rows += [(name, "-") for name in LINT_SHAPES]
    print(f"| payload | expected (analyze) | {what} outcome | seconds | CPU seconds | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for name, expected in rows:
        if args.only not in name:
            continue
        outcome, elapsed, cpu, rss = measure(name, args.lint)
        seconds = "-" if elapsed is None else f"{elapsed:.2f}"
        cpu_seconds = "-" if cpu is None else f"{cpu:.2f}"
        memory = "-" if rss is None else f"{rss / 1024:.0f}"
        print(f"| {name} | {expected} | {outcome} | {seconds} | {cpu_seconds} | {memory} |", flush=True)

if __name__ == "__main__":
    main()
