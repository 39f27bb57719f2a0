"""The hostile templates of a whole ``chatjinja portability`` run, each run through the command line in a fresh process.

``run_in_fresh_process(case, workdir)`` writes the template, runs ``chatjinja portability --format json``
in a new interpreter (``cli.main``, in-process there) and returns the exit code, the report, the wall
time, the process's own peak RSS (``VmHWM``), the largest peak RSS of the engine processes it waited for
(``RUSAGE_CHILDREN``) and the processes left behind (any process still carrying the run's marker in its
environment). ``benchmarks/bench_portability_budget.py`` prints them; the tests use the templates with
an injected budget instead.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from tests.work import SRC, cli_in_fresh_process

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
_CHAIN = "|string|trim|lower|upper|replace('1', '2')|replace('3', '4')|replace('5', '6')|trim|lower|upper|replace('7', '8')"

#: the issue's three (a loop of 1,000,000 iterations, a render of about 1 s, an output of 50 MB), a loop
#: just within chatjinja's loop budget and a template that keeps 92 MB of strings, each in front of a
#: ChatML template
TEMPLATES = {
    # 1,001,000 iterations: over chatjinja's max_loop_iterations, so chatjinja refuses it; the engines do not
    "loop_1m": "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}" + CHATML,
    # 999,999 iterations: within every chatjinja budget, and a few seconds in some engines
    "loop_999k": "{% for i in range(999) %}{% for j in range(1000) %}{% endfor %}{% endfor %}" + CHATML,
    # 99,999 iterations of a filter chain: about 1 s a render in chatjinja, within its budgets
    "slow_filter_chain": "{% for i in range(99999) %}{% set x = i" + _CHAIN * 2 + "|length %}{% endfor %}" + CHATML,
    # 50,000,000 characters: over chatjinja's output budget; an engine builds it whole
    "prints_50mb": "{% for i in range(50) %}{{ 'x' * 1000000 }}{% endfor %}" + CHATML,
    # eleven strings of 8 Mi characters kept in a list (92 MB; 235 MB of chatjinja's max_built_bytes with
    # what building them takes), in the one conversation that asks for the generation prompt: chatjinja
    # renders it, so every engine is sent it (llama.cpp copies the list at each +: about 2 GB)
    "keeps_strings": "{% if add_generation_prompt %}{% set ns = namespace(s='x', kept=[]) %}"
                     "{% for i in range(23) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
                     "{% for c in ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k'] %}"
                     "{% set ns.kept = ns.kept + [(ns.s ~ c) | upper] %}{% endfor %}{{ ns.kept | length }}{% endif %}" + CHATML,
}
#: the marker put into the fresh process's environment: every process it starts inherits it
MARKER = "CHATJINJA_PORTABILITY_RUN"


def _marked(marker: str) -> list[int]:
    """Processes (other than this one) whose environment holds ``MARKER=marker``."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if needle in environ.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def run_in_fresh_process(case: str, workdir: Path, src: Path = SRC, extra: tuple[str, ...] = ()) -> dict:
    """Run ``chatjinja portability`` on ``case`` in a new interpreter:
    ``{"code", "stderr", "report", "seconds", "peak", "engine_peak", "left"}`` (``report`` is the JSON report)."""
    template = workdir / f"{case}.jinja"
    template.write_text(TEMPLATES[case], encoding="utf-8")
    out = workdir / f"{case}.json"
    argv = ["portability", str(template), "--format", "json", "--no-install", "-o", str(out), *extra]
    marker = uuid.uuid4().hex
    result = cli_in_fresh_process(argv, src=src, env={**os.environ, MARKER: marker})
    result["engine_peak"] = result.pop("children_peak")
    result["report"] = json.loads(out.read_text(encoding="utf-8")) if result["code"] is not None and out.exists() else None
    result["left"] = _marked(marker)
    return result
