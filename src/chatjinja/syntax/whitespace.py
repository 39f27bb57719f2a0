"""Whitespace control on the AST: which characters of each ``Data`` node reach the output.

jinja2 with the options transformers uses (``trim_blocks=True``, ``lstrip_blocks=True``,
``keep_trailing_newline=False`` aside): a ``-`` marker strips all whitespace on its side; after a
``%}`` or ``#}`` without ``+`` the first newline goes (trim_blocks); before a ``{%`` or ``{#``
without ``+`` the spaces and tabs from the start of its line go when nothing else is on that line
before the tag (lstrip_blocks). ``{{ }}`` takes part in neither option. What survives of a text
node is always one contiguous slice of it, so :func:`kept_ranges` gives source offsets and
:func:`effective_texts` the text.
"""

from __future__ import annotations

import re
from typing import Iterable

from . import ast
from .visitor import walk

__all__ = ["effective_texts", "kept_ranges", "tags_and_datas"]

_WS_TAIL = re.compile(r"[ \t]*$")


def tags_and_datas(nodes: Iterable[ast.Node]) -> tuple[list[ast.Tag], list[ast.Data]]:
    """The delimiter tags and text nodes among ``nodes``."""
    tags, datas = [], []
    for node in nodes:
        if isinstance(node, ast.Tag):
            tags.append(node)
        elif isinstance(node, ast.Data):
            datas.append(node)
    return tags, datas


def kept_ranges(text: str, tags: list[ast.Tag], datas: list[ast.Data],
                keep_trailing_newline: bool = False) -> dict[int, tuple[int, int]]:
    """Each ``Data`` node's surviving slice as source offsets ``(start, end)``, keyed by its start offset.

    ``start == end`` when whitespace control removes all of it. Without ``keep_trailing_newline``
    (jinja2's default, and transformers') one newline at the very end of the template is dropped too.
    """
    cut = 0
    if not keep_trailing_newline:
        cut = 2 if text.endswith("\r\n") else 1 if text.endswith(("\n", "\r")) else 0
    tags_by_end = {tag.span.end: tag for tag in tags}
    tags_by_start = {tag.span.start: tag for tag in tags}
    result: dict[int, tuple[int, int]] = {}
    for data in datas:
        value = data.text
        if cut and data.span.end == len(text):
            value = value[: len(value) - cut]
        lo, hi = 0, len(value)
        before = tags_by_end.get(data.span.start)
        after = tags_by_start.get(data.span.end)
        if before is not None:
            if before.strip_right:
                lo = len(value) - len(value.lstrip())
            elif before.name != "{{" and not before.keep_right:
                if value.startswith("\r\n"):
                    lo = 2
                elif value.startswith("\n") or value.startswith("\r"):
                    lo = 1
        if after is not None and hi > lo:
            if after.strip_left:
                hi = lo + len(value[lo:].rstrip())
            elif after.name != "{{" and not after.keep_left and value[hi - 1] in " \t\n":
                # (text ending in anything else has no blank tail)
                tail = _WS_TAIL.search(value, lo)
                if tail is not None and tail.start() < hi:
                    line_start = text.rfind("\n", 0, data.span.start + tail.start()) + 1
                    if text[line_start : after.span.start].strip(" \t") == "":
                        hi = tail.start()
        start = data.span.start
        result[start] = (start + lo, start + max(lo, hi))
    return result


def effective_texts(template: ast.Template, text: str, nodes: list | None = None,
                    tags: list | None = None, datas: list | None = None) -> dict[int, str]:
    """Each ``Data`` node's text after ``-`` markers, trim_blocks and lstrip_blocks (keyed by start offset).

    The tags and text nodes come from ``nodes``, or already sorted out as ``tags`` and ``datas``,
    or else from a walk of the template. A newline at the very end of the template is kept (dropping
    it is the renderer's concern, not this model's): the analyser's symbolic runs read these texts.
    """
    if tags is None or datas is None:
        tags, datas = tags_and_datas(nodes if nodes is not None else walk(template))
    return {key: text[a:b] for key, (a, b) in kept_ranges(text, tags, datas, keep_trailing_newline=True).items()}
