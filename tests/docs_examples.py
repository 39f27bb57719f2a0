"""The code examples of README.md and docs/: read from the Markdown, so the docs test can run them.

Conventions (docs/README.md says them to writers):

- ```python blocks run in order, one namespace per page, in a fresh directory (with ``templates/``);
- ```pycon blocks are doctests in the same namespace: each ``>>>`` line's output must be what follows it;
- ```console blocks: each ``$ command`` runs in bash there; the lines after it, up to the next ``$``,
  are its expected standard output (a line ``...`` stands for any number of lines); a command with no
  output shown must exit 0 or 1 and print no ``error:`` line;
- ```sh blocks: every command runs as in a console block with no output shown;
- ``<!-- file: NAME -->`` before a block writes the block to NAME in that directory instead of running it;
- ``<!-- not-run: REASON -->`` before a block leaves it out (a reason is required);
- blocks in other languages (json, toml, yaml, text, jinja) are data, not examples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN_LANGUAGES = ("python", "pycon", "console", "sh")
_FENCE = re.compile(r"^```([A-Za-z0-9_-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_MARK = re.compile(r"<!--\s*(file|not-run):\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, text, line, and what the comment before it says."""

    page: Path
    line: int
    language: str
    text: str
    file: str | None = None  # write the block to this file
    not_run: str | None = None  # the reason it is not run

    @property
    def runs(self) -> bool:
        return self.file is None and self.not_run is None and self.language in RUN_LANGUAGES

    def id(self, root: Path) -> str:
        return f"{self.page.relative_to(root)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.search(before)
        kind, value = (mark.group(1), mark.group(2)) if mark else (None, None)
        if kind == "not-run" and not value:
            raise ValueError(f"{page}:{text.count(chr(10), 0, match.start()) + 1}: not-run needs a reason")
        found.append(
            Block(
                page,
                text.count("\n", 0, match.start()) + 1,
                match.group(1).lower(),
                match.group(2),
                file=value if kind == "file" else None,
                not_run=value if kind == "not-run" else None,
            )
        )
    return found


@dataclass(frozen=True)
class Command:
    """A shell command of a console or sh block and the standard output it shows (None: none shown)."""

    line: str
    expected: list[str] | None


def commands_of(block: Block) -> list[Command]:
    lines = _joined(block.text.splitlines())
    if block.language == "sh":
        return [Command(line, None) for line in lines if line.strip() and not line.lstrip().startswith("#")]
    commands: list[Command] = []
    for line in lines:
        if line.startswith("$ "):
            commands.append(Command(line[2:], []))
        elif commands:
            commands[-1].expected.append(line)  # type: ignore[union-attr]
    return [Command(c.line, c.expected or None) for c in commands]


def _joined(lines: list[str]) -> list[str]:
    """Lines with backslash continuations joined."""
    out: list[str] = []
    pending = ""
    for line in lines:
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` lines match ``expected``, where an expected ``...`` line matches any lines."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(output_matches(rest, actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and actual[0].rstrip() == head.rstrip() and output_matches(rest, actual[1:])
