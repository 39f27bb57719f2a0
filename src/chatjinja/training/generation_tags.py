"""Synthesise ``{% generation %}`` tags: a copy of a chat template that marks what the model writes in each assistant turn.

How (docs/guide/training.md, "Generation tags"): the template is parsed (``chatjinja.parse``, the
static budgets apply) and an instrumented copy, whose every ``{{ }}`` prints markers around each
operand of its top-level ``+``/``~`` chain, renders a few conversations with unique needle strings
(``probe`` renders, under the renderer's budgets). The markers say which output site printed each
assistant message's content, reasoning and tool calls, where the role header that
``add_generation_prompt=True`` writes ends, and where the turn ends (the render of the conversation
cut after that message). Each turn becomes a run of sibling
statements in the AST (one run per level when it starts inside a nested block), its first ``{{ }}``
split after the header when header and content share one expression; statements that every role runs
(the whole turn, or its tail after the assistant branch) are duplicated under
``{% if <message>['role'] == 'assistant' %}``; output of other messages inside a turn and, when a later
statement reads a name the turn sets, the ``{% set %}`` statements are left between blocks (a
generation block is a call block, which keeps its assignments). Templates that print only text-chunk
content are measured with chunks. A header that ends inside a string constant splits the constant;
template text after the header right before the turn's first output (a ``<think>``) joins the run; an
end-of-turn marker written as template text after the content's loop joins the turn; a ``{{ }}`` that
printed part of a turn outside its run (a second tool call's branch) gets a block of its own; a run whose first
statement prints the role header in another conversation (an ``{% if %}`` whose ``else`` prints the prompt's
``</think>``) starts inside it instead, when that copy verifies.
The copy is then rendered against the original on the probe conversations and seeded random ones:
identical text (or the same error), every needle where it belongs and no span of another role's
turn marker, else a refusal
(:class:`GenerationTagsRefused`, whose message is the reason). A refusal is never a wrong copy.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import ChatJinjaError
from ..observation import PROBE_BUDGETS, Outcome, probe_conversations, render_text
from ..observation.render import error_text
from ..runtime.budget import BudgetExceeded, Spending, resolve_budgets
from ..syntax import parse
from ..syntax import ast as A
from ..syntax.visitor import iter_fields, walk

__all__ = ["CALL_BUDGETS", "MAX_RENDERS", "GenerationTagsBudgetExceeded", "GenerationTagsRefused", "add_generation_tags"]

#: the most renders one call makes (original, instrumented copy and tagged copy together)
MAX_RENDERS = 240
#: the budget of one call for all its renders together (docs/reference/budgets.md, "One call of
#: generation-tags"): the characters they print, their fuel (``max_steps`` counts it the same way) and
#: a clock backstop, in seconds. Each render also runs under the probe budgets (``PROBE_BUDGETS``), its
#: limits lowered to what the call has left. The whole corpus needs at most 3 % of each.
CALL_BUDGETS = {"total_output_chars": 8 * 1024 * 1024, "total_steps": 5_000_000, "total_seconds": 10.0}
#: what one render of the instrumented copy may print: operand markers (``_pieces`` makes an object of each)
MAX_PIECES = 100_000
#: a render's text (or error) is kept for the same render asked again only up to this many characters;
#: a longer one is rendered again, and charged again, when it is needed twice
KEEP_CHARS = 64 * 1024
_PER_RENDER = resolve_budgets(PROBE_BUDGETS)
_OPEN, _SEP, _CLOSE = "\ue000", "\ue001", "\ue002"
_MARKERS = re.compile("[\ue000\ue002]")
_RANDOM_CONVERSATIONS = 8
_SCOPED = (A.For, A.Macro, A.CallBlock, A.FilterBlock, A.SetBlock, A.With, A.Block)


class GenerationTagsRefused(ChatJinjaError, ValueError):
    """``add_generation_tags`` cannot tag this template safely; the message is the reason."""


class GenerationTagsBudgetExceeded(GenerationTagsRefused):
    """The renders of one call together crossed a budget of :data:`CALL_BUDGETS` (``budget``, ``limit``)
    or :data:`MAX_RENDERS` / :data:`MAX_PIECES`; the message names it."""

    def __init__(self, budget: str, limit: Any, detail: str):
        self.budget = budget
        self.limit = limit
        super().__init__(f"budget {budget} of the call exceeded (limit {limit}): {detail}")


class _SelfReading(GenerationTagsRefused):
    """The marked copy rendered other text than the template (its own output is read back)."""


def add_generation_tags(source: str) -> str:
    """A copy of ``source`` with ``{% generation %}...{% endgeneration %}`` around what the model writes in each assistant turn.

    The tags hold the turn's reasoning, content, tool calls and end-of-turn marker, never the role
    header ``add_generation_prompt=True`` writes nor any other message. The copy renders the same
    text as ``source`` for every conversation (checked by rendering the probe conversations and
    random ones before returning). A template that already has generation tags is returned
    unchanged: its author's tags are what transformers computes masks from, and tagging again
    would nest blocks. Raises :class:`GenerationTagsRefused` (a ``ValueError``) naming the reason
    when the template cannot be tagged provably, and ``TemplateSyntaxError`` or
    ``StaticLimitExceeded`` for a template the parser rejects.
    """
    if not isinstance(source, str):
        raise TypeError(f"add_generation_tags() takes the template source text, got {type(source).__name__}")
    tree = parse(source)
    if any(isinstance(node, A.Generation) for node in walk(tree)):
        return source
    if any(marker in source for marker in (_OPEN, _SEP, _CLOSE)):
        raise GenerationTagsRefused("the template contains the private-use characters U+E000-U+E002 the analysis marks output with")
    return _Tagger(source, tree).run()


# ---- the budget of the call ------------------------------------------------------------------


class _CallBudget:
    """What the renders of one call have spent, against :data:`CALL_BUDGETS`; each render gets the probe budgets
    lowered to what is left."""

    def __init__(self) -> None:
        self.output = 0
        self.steps = 0
        self.deadline = time.monotonic() + CALL_BUDGETS["total_seconds"]

    def for_render(self) -> tuple[Any, dict[str, str]]:
        """The budgets of the next render, and which of its budgets were lowered to the call's (render budget -> call budget)."""
        left_output = CALL_BUDGETS["total_output_chars"] - self.output
        left_steps = CALL_BUDGETS["total_steps"] - self.steps
        left_seconds = self.deadline - time.monotonic()
        if left_output <= 0:
            raise self.exceeded("total_output_chars")
        if left_steps <= 0:
            raise self.exceeded("total_steps")
        if left_seconds <= 0:
            raise self.exceeded("total_seconds")
        base = _PER_RENDER
        changes: dict[str, Any] = {}
        lowered: dict[str, str] = {}
        for name, left, call in (("max_output_chars", left_output, "total_output_chars"),
                                 ("max_steps", left_steps, "total_steps"), ("timeout", left_seconds, "total_seconds")):
            limit = getattr(base, name)
            if limit is None or left < limit:
                changes[name] = left
                lowered[name] = call
        return base.replace(**changes) if changes else base, lowered

    def charge(self, spending: Spending, text_chars: int) -> None:
        self.steps += spending.steps
        self.output += max(spending.output, text_chars)

    def exceeded(self, budget: str) -> GenerationTagsBudgetExceeded:
        spent = {"total_output_chars": f"its renders printed {self.output} characters",
                 "total_steps": f"its renders spent {self.steps} steps of fuel",
                 "total_seconds": "its renders ran out of time"}[budget]
        return GenerationTagsBudgetExceeded(budget, CALL_BUDGETS[budget], spent)


# ---- the template's structure ---------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    """One operand of one ``{{ }}`` as it rendered: clean-text offsets and how deep in other output it was."""

    output: int
    operand: int
    start: int
    end: int
    depth: int


@dataclass
class _Range:
    """A run of sibling statements ``body[first..last]`` to wrap, the first ``{{ }}`` split before ``operand`` (or,
    with ``cut``, inside that operand, a string constant, after its first ``cut`` characters)."""

    body: tuple
    key: tuple
    first: int
    last: int
    operand: int
    conditional: bool = False
    cut: int = 0



class _Structure:
    """Parents, bodies, output sites and delimiters of a parsed template."""

    def __init__(self, source: str, tree: A.Template):
        self.source = source
        self.tree = tree
        self.parent: dict[int, tuple[A.Node, str, int]] = {}
        self.outputs: list[A.Output] = []
        self.output_index: dict[int, int] = {}
        self.tag_at_start: dict[int, A.Tag] = {}
        self.tag_at_end: dict[int, A.Tag] = {}
        self.data_at_start: dict[int, A.Data] = {}
        self.data_at_end: dict[int, A.Data] = {}
        self.nodes: dict[int, A.Node] = {}
        for node in walk(tree):
            self.nodes[id(node)] = node
            if isinstance(node, A.Output):
                self.output_index[id(node)] = len(self.outputs)
                self.outputs.append(node)
            elif isinstance(node, A.Tag):
                self.tag_at_start[node.span.start] = node
                self.tag_at_end[node.span.end] = node
            elif isinstance(node, A.Data):
                self.data_at_start[node.span.start] = node
                self.data_at_end[node.span.end] = node
            for name, value in iter_fields(node):
                if isinstance(value, tuple) and value and all(isinstance(v, (A.Stmt, A.Elif)) for v in value):
                    for index, child in enumerate(value):
                        self.parent[id(child)] = (node, name, index)

    def path(self, node: A.Node) -> list[tuple[tuple, tuple, int]]:
        """``(body key, body, index)`` from the template's body down to ``node``."""
        steps = []
        while id(node) in self.parent:
            owner, name, index = self.parent[id(node)]
            steps.append(((id(owner), name), getattr(owner, name), index))
            node = owner
        steps.reverse()
        return steps

    def enclosing(self, key: tuple, kinds: tuple) -> list[A.Node]:
        """The statements of ``kinds`` around the body ``key``, innermost first."""
        found = []
        node = self.nodes.get(key[0])
        while node is not None:
            if isinstance(node, kinds):
                found.append(node)
            parent = self.parent.get(id(node))
            node = parent[0] if parent else None
        return found

    def inner(self, output: A.Output) -> tuple[int, int]:
        """Source offsets of the expression text of ``{{ ... }}``."""
        start, end = output.tag.span.start + 2, output.tag.span.end - 2
        if self.source[start] in "-+":
            start += 1
        if self.source[end - 1] in "-+":
            end -= 1
        return start, end


def _operands(expr: A.Expr) -> tuple[str | None, list[A.Expr]]:
    """The top-level ``+`` chain (flattened to the left) or ``~`` items of an output expression."""
    if isinstance(expr, A.BinOp) and expr.op == "+":
        items: list[A.Expr] = [expr.right]
        left = expr.left
        while isinstance(left, A.BinOp) and left.op == "+":
            items.append(left.right)
            left = left.left
        items.append(left)
        items.reverse()
        return "+", items
    if isinstance(expr, A.Concat):
        return "~", list(expr.items)
    return None, [expr]


# ---- the analysis ---------------------------------------------------------------------------


class _Tagger:
    """One call of :func:`add_generation_tags`: instrument, locate the turns, rewrite, verify."""

    def __init__(self, source: str, tree: A.Template):
        self.source = source
        self.structure = _Structure(source, tree)
        self.renders = 0
        self.header_text = ""
        self.rendered: dict[tuple, tuple[Any, Any]] = {}  # renders of at most KEEP_CHARS characters
        self.budget = _CallBudget()
        self.foreign: set[int] = set()  # the {{ }} that print another message's text in some conversation
        self.splits: dict[int, tuple[str | None, list[tuple[int, int]]]] = {}
        self.needles = _Needles(source)
        self.loose: dict[_Piece, _Piece] = {}  # a start piece -> the first operand the run may start at instead
        self.cuts: dict[_Piece, int] = {}  # a start piece that is a string constant -> where the role header ends in it
        self.fine = False  # blocks leave out the turn's {% set %} statements
        self.chunked = False  # the conversations give content as [{"type": "text", "text": ...}]
        self.header_sites: set[int] = set()  # the {{ }} that print part of an assistant turn's role header
        self.lower: set[tuple] = set()  # (body key, index) of statements a turn's run starts inside of, not at
        self.gaps: dict[_Piece, str] = {}  # a start piece -> the text between the role header's end and it

    # rendering, counted

    def render(self, template: str, messages: list, spans: bool = False, **kwargs: Any) -> tuple[Any, Any]:
        """``(text or spans pair, None)`` or ``(None, "Type: message")``, under what is left of the call's budget."""
        key = (template, repr(messages), spans, repr(sorted(kwargs.items())))
        kept = self.rendered.get(key)
        if kept is not None:  # the same render asked again (locating and the foreign sites share them)
            return kept
        self.renders += 1
        if self.renders > MAX_RENDERS:
            raise GenerationTagsBudgetExceeded("max_renders", MAX_RENDERS, f"the analysis needs more than {MAX_RENDERS} renders")
        budgets, lowered = self.budget.for_render()
        spending = Spending()
        try:
            # kwargs are render parameters (tools=, add_generation_prompt=, ...), never template variables
            with spending:
                rendered = render_text(template, messages, spans=spans, budgets=budgets, reraise=(BudgetExceeded,),
                                       output_limit=None, **kwargs)
        except BudgetExceeded as exc:
            if exc.budget in lowered:  # stopped by what the call had left, not by the render's own budget
                self.budget.charge(spending, 0)
                raise self.budget.exceeded(lowered[exc.budget]) from None
            rendered = Outcome(None, error_text(exc))
        if rendered.ok:
            result = (rendered.text, rendered.spans) if spans else rendered.text
            outcome: tuple[Any, Any] = (result, None)
        else:
            outcome = (None, rendered.error)
        size = len(outcome[1]) if outcome[1] is not None else len(result[0] if spans else result)
        self.budget.charge(spending, size if outcome[1] is None else 0)
        if size <= KEEP_CHARS:  # a longer text is not kept: asked again, it is rendered again
            self.rendered[key] = outcome
        return outcome

    # the instrumented copy

    def instrumented(self, shallow: bool = False) -> str:
        """The template with markers around each output operand (``shallow``: only outside macros and captures)."""
        edits = []
        captured = _captured_outputs(self.structure.tree) if shallow else set()
        for k, output in enumerate(self.structure.outputs):
            if id(output) in captured:
                continue
            start, end = self.structure.inner(output)
            op, operands = _operands(output.expr)
            if op == "+" and not any(_is_string(o) for o in operands):
                op = None  # numbers add: only a chain with a string in it concatenates
            texts = [self.source[o.span.start:o.span.end] for o in operands]
            if op is None or not all(_parses(t) for t in texts):
                op, operands, texts = None, [output.expr], [self.source[start:end]]
            cuts = [(o.span.start, o.span.end) for o in operands]
            self.splits[k] = (op, cuts)
            body = " ~ ".join(f"'{_OPEN}{k}.{j}{_SEP}' ~ ({t})" for j, t in enumerate(texts))
            edits.append((start, end, f" {body} ~ '{_CLOSE}' "))
        text = _apply(self.source, edits)
        try:
            parse(text, max_source_chars=None, max_source_tokens=None)
        except Exception:  # noqa: BLE001
            raise GenerationTagsRefused("the instrumented copy of the template does not parse") from None
        return text

    def run(self) -> str:
        n = self.needles
        m1, m2, a1, a2, r1, f1, g1, t1 = (n.new() for _ in range(8))
        user, user2 = {"role": "user", "content": m1}, {"role": "user", "content": m2}
        call = {"id": "call0", "type": "function", "function": {"name": f1, "arguments": {"arg": g1}}}
        f2, t2, r2 = n.new(), n.new(), n.new()
        second = {"id": "call1", "type": "function", "function": {"name": f2, "arguments": {"arg": 1}}}
        conversations: list[list[dict[str, Any]]] = [
            [user, {"role": "assistant", "content": a1}],
            [user, {"role": "assistant", "content": a1}, user2],
            [user, {"role": "assistant", "content": a1, "reasoning_content": r1}],
            [user, {"role": "assistant", "content": a1, "reasoning_content": r1}, user2],
            [user, {"role": "assistant", "content": "", "tool_calls": [call]},
             {"role": "tool", "tool_call_id": "call0", "name": f1, "content": t1},
             {"role": "assistant", "content": a2}, user2],
            [user, {"role": "assistant", "content": a1, "tool_calls": [call]},
             {"role": "tool", "tool_call_id": "call0", "name": f1, "content": t1},
             {"role": "assistant", "content": a2}],
            # parallel calls: a template may print the second call by another branch ("\n<｜tool▁call▁begin｜>..."); the
            # results carry no name, so the call names are checked as the assistant's alone
            [user, {"role": "assistant", "content": "", "tool_calls": [call, second]},
             {"role": "tool", "tool_call_id": "call0", "content": t1},
             {"role": "tool", "tool_call_id": "call1", "content": t2},
             {"role": "assistant", "content": a2}, user2],
            # two answers, the second with reasoning: a template may print the turns after the first answer by another
            # loop (Kimi-K2-Thinking keeps the reasoning of the turns after the first assistant message without calls)
            [user, {"role": "assistant", "content": a1}, user2, {"role": "assistant", "content": a2, "reasoning_content": r2}],
        ]
        basic, error = self.render(self.source, conversations[1])
        if error is not None or a1 not in basic:  # a template for content given as a list of text chunks?
            chunked, chunked_error = self.render(self.source, _chunked(conversations[1]))
            if chunked_error is None and a1 in chunked:
                self.chunked = True
                conversations = [_chunked(c) for c in conversations]
                user = conversations[0][0]
            elif error is not None:
                raise GenerationTagsRefused(f"the template does not render [user, assistant, user]: {error[:200]}")
            else:
                raise GenerationTagsRefused("the template renders no assistant message content")
        header = self.header_text = self.header(user)
        try:
            instrumented = self.instrumented()
            ranges = self.located(instrumented, conversations, header)
        except _SelfReading:  # markers in a macro's or a capture's output changed what the template did with it
            instrumented = self.instrumented(shallow=True)
            ranges = self.located(instrumented, conversations, header)
        if not ranges:
            raise GenerationTagsRefused("no assistant turn could be located in the output")
        try:
            ranges = _merged(ranges)
            copy = self.rewrite(ranges)
        except GenerationTagsRefused as refusal:
            if not ("would not reach there" in str(refusal) or "overlap" in str(refusal)):
                raise
            # a finer cut: the {% set %} statements of a turn stay outside its blocks (they print nothing)
            self.fine = True
            ranges = _merged(self.located(instrumented, conversations, header))
            copy = self.rewrite(ranges)
        lowered = self.lowered(ranges, instrumented, conversations, header)
        if lowered is not None:
            return lowered
        failure = self.verify(copy, conversations)
        if failure is not None and " text inside a generation span" in failure and not all(r.conditional for r in ranges):
            for r in ranges:
                r.conditional = True
            copy = self.rewrite(ranges)
            failure = self.verify(copy, conversations)
        if failure is not None:
            raise GenerationTagsRefused(f"the tagged copy failed verification: {failure}")
        return copy

    def lowered(self, ranges: list[_Range], instrumented: str, conversations: list, header: str) -> str | None:
        """The copy whose runs start inside the statement that opens them, where that statement prints a role header.

        A run starts at the statement holding its turn's first output, an ``{% if %}`` that prints ``<think>`` and the
        reasoning or else the ``</think>`` the generation prompt writes (Laguna): the turns through the other branch
        would have the prompt's text in their span. Such runs start inside the statement instead (a block from the
        output to the end of each body on the way out, as for a split expression); None when no run opens that way
        or the copy fails verification (the copy of whole statements is then verified as before).
        """
        s = self.structure
        found = set()
        for r in ranges:
            first = r.body[r.first]
            for k in self.header_sites:
                output = s.outputs[k]
                if output is not first and first.span.start <= output.span.start < first.span.end:
                    found.add((r.key, r.first))
        if not found:
            return None
        self.lower = found
        try:
            copy = self.rewrite(_merged(self.located(instrumented, conversations, header)))
        except GenerationTagsRefused:
            copy = None
        self.lower = set()
        if copy is None or self.verify(copy, conversations) is not None:
            return None
        return copy

    def located(self, instrumented: str, conversations: list, header: str) -> list[_Range]:
        # first the {{ }} that print another message's text in any conversation (a tool result printed inside the
        # assistant's turn): the turns of every conversation are carved around all of them, so the merged blocks
        # hold none of them
        for messages in conversations:
            marked = self.marked(instrumented, messages)
            if marked is not None:
                clean, pieces = marked
                self.foreign |= _foreign_sites(clean, [p for p in pieces if p.depth == 0], messages)
        ranges: list[_Range] = []
        for messages in conversations:
            ranges.extend(self.turn_ranges(instrumented, messages, header))
        return ranges

    def header(self, user: dict) -> str:
        """The non-blank text ``add_generation_prompt=True`` adds after ``[user]`` ("" when none)."""
        off, _ = self.render(self.source, [user])
        on, _ = self.render(self.source, [user], add_generation_prompt=True)
        if off is None or on is None:
            return ""
        prefix = len(_common_prefix(on, off))
        suffix = len(_common_prefix(on[prefix:][::-1], off[prefix:][::-1]))
        header = on[prefix:len(on) - suffix].strip()
        # a reasoning block the prompt opens is the model's to write: the header is what comes before it
        return header.split("<think>")[0].strip() or header

    def marked(self, instrumented: str, messages: list) -> tuple[str, list[_Piece]] | None:
        """The clean text and output pieces of the instrumented render (None when the template fails on ``messages``)."""
        original, error = self.render(self.source, messages)
        if error is not None:
            return None
        marked, error = self.render(instrumented, messages)
        if error is not None:
            raise GenerationTagsRefused(f"the instrumented copy fails where the template renders: {error[:200]}")
        clean, pieces = _pieces(marked)
        if clean != original:
            raise _SelfReading("the template's output depends on the text of its own output (instrumented copy differs)")
        return clean, pieces

    def turn_ranges(self, instrumented: str, messages: list, header: str) -> Iterator[_Range]:
        found = self.marked(instrumented, messages)
        if found is None:
            return
        clean, pieces = found
        top = [p for p in pieces if p.depth == 0]
        previous_end = 0
        for index, message in enumerate(messages):
            needles = [x for x in _message_needles(message) if x in clean[previous_end:]]
            if not needles:
                continue
            positions = sorted(clean.index(x, previous_end) for x in needles)
            first = positions[0]
            last = max(clean.index(x, previous_end) + len(x) for x in needles)
            if message["role"] != "assistant":
                previous_end = last
                continue
            start = self.start_piece(clean, top, previous_end, first, header)
            if start is None:
                site = next((p for p in top if p.start <= first < p.end), None)
                where = f" (line {self.structure.outputs[site.output].span.line})" if site else ""
                raise GenerationTagsRefused(
                    "an assistant turn's role header and its content are printed by one expression that cannot be "
                    f"split without changing what it renders{where}")
            turn_end = self.turn_end(messages, index, clean)
            loop = self.loop_of(start)
            own = top if loop is None else [p for p in top if loop.span.start <= self.structure.outputs[p.output].span.start < loop.span.end]
            end = _end_piece(own, start, last, turn_end)
            user_sites = self.foreign | _foreign_sites(clean, top, messages)
            content_site = next((p.output for p in top if p.start <= first < p.end), start.output)
            tail = clean[end.end:turn_end] if turn_end is not None and turn_end > end.end else ""
            ranges = self.range_of(start, end, turn_end, user_sites, content_site in user_sites, tail)
            between = [p for p in top if start.end <= p.start and p.end <= end.start and p.output not in user_sites
                       and clean[p.start:p.end].strip()]
            yield from ranges + self.uncovered(ranges, between)
            previous_end = last

    def start_piece(self, clean: str, top: list[_Piece], previous_end: int, first: int, header: str) -> _Piece | None:
        region = clean[previous_end:first]
        h = None
        if header:
            for length in range(len(header), min(len(header), 4) - 1, -1):
                prefix = _whole_tokens(header[:length]) if length < len(header) else header
                at = region.rfind(prefix) if len(prefix) >= min(len(header), 4) else -1
                if at >= 0:
                    h = previous_end + at + len(prefix)
                    self.header_sites.update(p.output for p in top if p.start < h and p.end > h - len(prefix)
                                             and clean[max(p.start, h - len(prefix)):min(p.end, h)].strip())
                    break
        if h is not None:
            # the header ends inside a string constant ("<|start|>assistant<|channel|>final<|message|>"): what follows it
            # there is the model's to write, so the run starts inside that constant
            inside = next((p for p in top if previous_end <= p.start < h < p.end and p.start < first), None)
            cut = self.constant_cut(inside, h - inside.start, clean) if inside is not None else 0
            if cut:
                self.cuts[inside] = cut
                return inside
        candidates = [p for p in top if p.start <= first and p.end > p.start]
        if h is None:  # no header to go by: the turn starts with the expression that prints its content
            site = next((i for i, p in enumerate(top) if p.start <= first < p.end), None)
            if site is None:
                return None
            begin = site
            while begin > 0 and top[begin - 1].output == top[site].output and top[begin - 1].operand < top[begin].operand \
                    and top[begin - 1].start >= previous_end:
                begin -= 1
            after = [p for p in top[begin:site + 1] if p.end > p.start]
        else:
            after = [p for p in candidates if p.start >= h]
        if not after:
            return None
        chosen = next((p for p in after if clean[p.start:p.end].strip()), after[0])
        if chosen.operand > 0:
            # the run may start at the expression's first operand when nothing but blanks lies in between
            first_operand = next((p for p in top if p.output == chosen.output and p.operand == 0
                                  and p.start <= chosen.start), None)
            if first_operand is not None and (h is None and not clean[first_operand.start:chosen.start].strip()
                                              or h is not None and (first_operand.start >= h
                                                                    or not clean[first_operand.start:h].strip())):
                self.loose[chosen] = first_operand
        if h is not None:
            self.gaps[chosen] = clean[h:chosen.start]
        return chosen

    def constant_cut(self, piece: _Piece, cut: int, clean: str) -> int:
        """``cut`` when ``piece`` printed a string constant whose text goes on, non-blank, after ``cut`` characters; else 0."""
        output = self.structure.outputs[piece.output]
        op, _ = self.splits[piece.output]
        operands = _operands(output.expr)[1] if op is not None else [output.expr]
        constant = operands[piece.operand] if piece.operand < len(operands) else None
        if not _is_string(constant) or clean[piece.start:piece.end] != constant.value or not constant.value[cut:].strip():
            return 0
        return cut

    def loop_of(self, piece: _Piece) -> A.For | None:
        """The outermost loop around a piece's ``{{ }}`` (the loop over messages): a turn ends inside it."""
        found = None
        for _, body, index in self.structure.path(self.structure.outputs[piece.output]):
            if isinstance(body[index], A.For):
                found = found or body[index]
        return found

    def turn_end(self, messages: list, index: int, clean: str) -> int | None:
        """Where the turn of ``messages[index]`` ends in ``clean``: the render cut after that message."""
        if index == len(messages) - 1:
            return len(clean.rstrip())
        cut, error = self.render(self.source, messages[: index + 1])
        if error is not None:
            return None
        common = min(len(_common_prefix(cut, clean)), len(cut.rstrip()))
        while common > 0 and clean[common - 1] in "<[{|":  # the next turn's marker and the cut's own both start here
            common -= 1
        return common

    def range_of(self, start: _Piece, end: _Piece, turn_end: int | None, user_sites: set[int],
                 generic: bool, tail: str = "") -> list[_Range]:
        """The statement runs of one turn: ``generic`` when the content's own ``{{ }}`` prints other roles too (the
        run is then wrapped in a role test); ``{{ }}`` of other messages inside the turn are carved out. ``tail`` is
        the text between the last output piece and the turn's end (its end-of-turn marker)."""
        s = self.structure
        loose = self.loose.get(start)
        path_s = s.path(s.outputs[start.output])
        key_i, body_i, index_i = path_s[-1]
        if start.operand == 0 and index_i > 0 and isinstance(body_i[index_i - 1], A.Data):
            # template text right before the turn's first output, after the role header (Kimi-K2-Thinking's "<think>"
            # before {{ rc }}, which its prompt does not write): the model's, so the run starts with it
            text = body_i[index_i - 1].text.strip()
            if text and self.gaps.get(start, "").rstrip().endswith(text):
                path_s[-1] = (key_i, body_i, index_i - 1)
        path_e = self.end_path(s.path(s.outputs[end.output]), end, tail)
        depth = 0  # the deepest body holding both (bodies are keyed by their owner, so the paths above agree)
        while depth + 1 < min(len(path_s), len(path_e)) and path_s[depth + 1][0] == path_e[depth + 1][0]:
            depth += 1
        while depth > 0 and path_s[depth][0][1] == "elifs":  # the branches of an if are not a run of statements
            depth -= 1
        if path_s[depth][0] != path_e[depth][0]:
            raise GenerationTagsRefused("an assistant turn starts and ends in different parts of the template")
        key, body, first = path_s[depth]
        last = path_e[depth][2]
        operand, cut = start.operand, self.cuts.get(start, 0)
        # the innermost level at or below which the turn is in an assistant-only branch: statements outside it run
        # for every role, so the part of the turn there is marked under a role test
        branch = next((level for level in range(depth + 1, len(path_s)) if _assistant_branch(s, path_s[level][0])), None)
        lowered: list[tuple] = []
        inside = (key, first) in self.lower and len(path_s) > depth + 1  # the run starts inside body[first] (lowered)
        if operand > 0 and not cut and len(path_s) > depth + 1 and loose is not None and branch is None and not inside:
            operand = 0
        elif ((operand > 0 or cut > 0) and len(path_s) > depth + 1) or branch is not None or inside:
            # a block from the start to the end of each body on the way out, then the rest of the turn
            for level in range(len(path_s) - 1, depth, -1):
                key_t, body_t, index_t = path_s[level]
                if key_t[1] == "elifs":
                    continue
                innermost = level == len(path_s) - 1
                shared = branch is not None and level < branch
                lowered.append((key_t, body_t, index_t if innermost else index_t + 1, len(body_t) - 1, operand, cut, shared))
                operand = cut = 0
            first += 1
        if turn_end is not None and end.end < turn_end:
            while last + 1 < len(body) and isinstance(body[last + 1], A.Data):
                last += 1
        if first > last and not lowered:
            raise GenerationTagsRefused("an assistant turn ends before it starts in the template's statement order")
        ranges = []
        for key_t, body_t, first_t, last_t, operand_t, cut_t, shared in lowered + [(key, body, first, last, operand, cut,
                                                                                      branch is not None)]:
            if first_t > last_t:
                continue
            if generic or shared:
                ranges.append(_Range(body_t, key_t, first_t, last_t, operand_t, conditional=True, cut=cut_t))
            else:
                ranges.extend(self.carved(body_t, key_t, first_t, last_t, operand_t, user_sites, cut_t))
        return ranges

    def uncovered(self, ranges: list[_Range], pieces: list[_Piece]) -> list[_Range]:
        """One range for each ``{{ }}`` that printed part of the turn outside ``ranges`` (a branch the turn's path did not
        go through: the second of two tool calls, printed by an ``else``)."""
        s = self.structure
        spans = [(r.body[r.first].span.start, r.body[r.last].span.end) for r in ranges]
        found = []
        for piece in pieces:
            output = s.outputs[piece.output]
            if any(a <= output.span.start < b for a, b in spans):
                continue
            key, body, index = s.path(output)[-1]
            found.append(_Range(body, key, index, index, 0))
            spans.append((output.span.start, output.span.end))
        return found

    def end_path(self, path: list, end: _Piece, tail: str) -> list:
        """The path to the statement that prints the turn's end: the end piece's, or, when the end-of-turn marker is
        template text after the body holding that piece (``{% for %}...{% endfor %}<end_of_utterance>``), the text's."""
        if not tail.strip():
            return path
        loop = self.loop_of(end)
        for level in range(len(path) - 1, -1, -1):
            key, body, index = path[level]
            if body[index] is loop or key[1] == "elifs":
                break
            found = None
            for j in range(index + 1, len(body)):
                stmt = body[j]
                if isinstance(stmt, A.Data) and stmt.text.strip():
                    if stmt.text.strip() not in tail:
                        break
                    found = j
            if found is not None:
                return path if level == len(path) - 1 else [*path[:level], (key, body, found)]
        return path

    def carved(self, body: tuple, key: tuple, first: int, last: int, operand: int, foreign: set[int],
               cut: int = 0) -> list[_Range]:
        """``body[first..last]`` without the statements that print other messages (tool results inside a turn)."""
        s = self.structure
        ranges: list[_Range] = []
        run_start = None
        for index in range(first, last + 1):
            stmt = body[index]
            printed = {s.output_index[id(n)] for n in walk(stmt) if isinstance(n, A.Output)}
            if not printed & foreign and not (self.fine and _assigns(stmt)):
                if run_start is None:
                    run_start = index
                continue
            if run_start is not None:
                ranges.append(_Range(body, key, run_start, index - 1, *((operand, False, cut) if run_start == first else (0,))))
                run_start = None
            if isinstance(stmt, (A.Set, A.SetBlock)):
                continue  # a name set here prints nothing: it stays outside the blocks
            if isinstance(stmt, A.Output):
                if index == first and (operand > 0 or cut > 0):
                    raise GenerationTagsRefused(f"an assistant turn's first expression prints another message too (line {stmt.span.line})")
                continue
            for name, value in iter_fields(stmt):
                bodies = [value] if name in ("body", "else_body") else [e.body for e in value] if name == "elifs" else []
                for inner in bodies:
                    if inner:
                        owner = stmt if name != "elifs" else None
                        for position, elif_ in enumerate(value if name == "elifs" else [stmt]):
                            if owner is None and elif_.body is not inner:
                                continue
                            holder = owner if owner is not None else elif_
                            field = name if owner is not None else "body"
                            ranges.extend(self.carved(inner, (id(holder), field), 0, len(inner) - 1, 0, foreign))
        if run_start is not None:
            ranges.append(_Range(body, key, run_start, last, *((operand, False, cut) if run_start == first else (0,))))
        return ranges

    # the rewrite

    def rewrite(self, ranges: list[_Range]) -> str:
        edits = []
        for r in ranges:
            self.check_scope(r)
            edits.append(self.edit(r))
        return _apply(self.source, edits)

    def check_scope(self, r: _Range) -> None:
        """A generation body is a call block: its ``{% set %}`` names do not reach past it, and it cannot break a loop."""
        s = self.structure
        assigned: dict[str, A.Node] = {}
        stack = list(r.body[r.first:r.last + 1])
        while stack:
            node = stack.pop()
            if isinstance(node, (A.Break, A.Continue)):
                raise GenerationTagsRefused(f"an assistant turn leaves its loop with {{% break %}} or {{% continue %}} (line {node.span.line})")
            if isinstance(node, (A.Set, A.SetBlock)):
                for target in walk(node.target):
                    if isinstance(target, A.Name):
                        assigned.setdefault(target.name, node)
            if not isinstance(node, _SCOPED):  # names set in a loop, macro or set block stay there anyway
                stack.extend(_children(node))
        if not assigned:
            return
        loops = s.enclosing(r.key, (A.For,))
        limit = loops[0].span.end if loops else len(self.source)
        elsewhere = self.other_branches(r)
        while True:  # a later statement of the same body that reads the name joins the turn, if it can
            end = r.body[r.last].span.end
            read = next((node for node in walk(s.tree) if isinstance(node, A.Name) and node.name in assigned
                         and end <= node.span.start < limit and not any(a <= node.span.start < b for a, b in elsewhere)), None)
            if read is None:
                return
            later = next((i for i in range(r.last + 1, len(r.body))
                          if r.body[i].span.start <= read.span.start < r.body[i].span.end), None)
            if later is None:
                stmt = assigned[read.name]
                raise GenerationTagsRefused(
                    f"an assistant turn sets '{read.name}' (line {stmt.span.line}), read after the turn (line "
                    f"{read.span.line}); inside a generation block the assignment would not reach there")
            r.last = later
            self.check_scope(r)
            return

    def other_branches(self, r: _Range) -> list[tuple[int, int]]:
        """Source ranges of the branches of each ``if`` around ``r`` that ``r`` is not in (never run after it)."""
        s = self.structure
        found = []
        for key, body, index in s.path(r.body[r.first]):
            owner = s.nodes.get(key[0])
            if isinstance(owner, A.If):
                current = body[index].body if key[1] == "elifs" else body
                for branch in [owner.body, *(e.body for e in owner.elifs), owner.else_body]:
                    if branch and branch is not current:
                        found.append((branch[0].span.start, branch[-1].span.end))
        return found

    def edit(self, r: _Range) -> tuple[int, int, str]:
        s = self.structure
        first, last = r.body[r.first], r.body[r.last]
        start, end = first.span.start, last.span.end
        head = ""
        if r.cut > 0:
            head, rest = self.cut_constant(r, first)
            body = rest + self.source[first.span.end:end]
            open_left, open_right, close_right = "", "", self._right(end)
            if not r.conditional:
                return start, end, head + "{% generation %}" + body + "{%" + close_right[0] + " endgeneration " + close_right[1] + "%}"
        elif r.operand > 0:
            op, cuts = self.splits[s.output_index[id(first)]]
            inner_start, inner_end = s.inner(first)
            gap_start, gap_end = cuts[r.operand - 1][1], cuts[r.operand][0]
            gap = self.source[gap_start:gap_end]
            if op is None or gap.count(op) != 1 or set(gap) - set("() \t\r\n" + op):
                raise GenerationTagsRefused(f"cannot split the expression at line {first.span.line}")
            if op == "+" and not any(_is_string(o) for o in _operands(first.expr)[1][:r.operand]):
                raise GenerationTagsRefused(
                    f"the role header at line {first.span.line} is not provably a string: splitting it off could change the output")
            at = gap_start + gap.index(op)
            left, right = self.source[inner_start:at], self.source[at + 1:inner_end]
            if not (_parses(left) and _parses(right)):
                raise GenerationTagsRefused(f"cannot split the expression at line {first.span.line}")
            head = self.source[first.tag.span.start:inner_start] + left.rstrip() + " }}"
            rest = "{{ " + ("'' + " if op == "+" else "") + right.lstrip() + self.source[inner_end:first.tag.span.end]
            body = rest + self.source[first.span.end:end]
            open_left, open_right, close_right = "", "", self._right(end)
            if not r.conditional:
                return start, end, head + "{% generation %}" + body + "{%" + close_right[0] + " endgeneration " + close_right[1] + "%}"
        else:
            start, open_left, open_right = self._opening(start)
            body = self.source[start:end]
            close_right = self._right(end)
        if not r.conditional:
            if open_left == "+":
                # transformers looks for generation tags with ``{%-?\s*generation``: instead of ``{%+``, the tag goes
                # to the start of its line, so lstrip_blocks has no blanks before it to strip
                line_start = self.source.rfind("\n", 0, start) + 1
                data = s.data_at_end.get(start)
                before = s.tag_at_end.get(data.span.start) if data is not None else None
                if data is not None and not data.text.strip() and before is not None and before.strip_right:
                    open_left = "-"  # the tag before strips all of it anyway
                elif data is not None and line_start >= data.span.start and not self.source[line_start:start].strip(" \t"):
                    start, body, open_left = line_start, self.source[line_start:end], ""
                elif self.source[line_start:start].strip(" \t"):
                    open_left = ""  # text before it on its line: lstrip_blocks does not apply
            return start, end, ("{%" + open_left + " generation " + open_right + "%}" + body
                                + "{%" + close_right[0] + " endgeneration " + close_right[1] + "%}")
        loops = s.enclosing(r.key, (A.For,))
        if not loops or not isinstance(loops[0].target, A.Name):
            raise GenerationTagsRefused("the statements that print an assistant turn print other roles too, outside a loop over messages")
        variable = loops[0].target.name
        inner_left = close_right[0]
        return start, end, (head + "{%" + open_left + f" if {variable}['role'] == 'assistant' %}}{{% generation {open_right}%}}"
                            + body + "{%" + inner_left + " endgeneration %}{%" + inner_left + " else " + open_right + "%}" + body
                            + "{%" + inner_left + " endif " + close_right[1] + "%}")

    def cut_constant(self, r: _Range, first: A.Output) -> tuple[str, str]:
        """``{{ ... "header" }}`` and ``{{ "rest" ... }}``: the first ``{{ }}`` split inside its string constant."""
        s = self.structure
        op, cuts = self.splits[s.output_index[id(first)]]
        operands = _operands(first.expr)[1] if op is not None else [first.expr]
        constant = operands[r.operand]
        inner_start, inner_end = s.inner(first)
        a, b = cuts[r.operand]
        left = self.source[inner_start:a] + _literal(constant.value[:r.cut])
        right = _literal(constant.value[r.cut:]) + self.source[b:inner_end]
        if not (_is_string(constant) and _parses(left) and _parses(right)):
            raise GenerationTagsRefused(f"cannot split the string at line {first.span.line} after its role header")
        head = self.source[first.tag.span.start:inner_start] + left.rstrip() + " }}"
        return head, "{{ " + right.lstrip() + self.source[inner_end:first.tag.span.end]

    def _opening(self, start: int) -> tuple[int, str, str]:
        """Where the opener of a block whose first statement starts at ``start`` goes, and its left and right markers.

        Text that starts the block after a tag keeps what that tag did to it: after ``-%}`` the opener strips it
        (``{% generation -%}``). After ``}}`` or ``+%}``, where the text's leading newline is kept, a block tag would
        lose it to trim_blocks, so the opener goes after the leading newlines (``+%}`` would hide it from
        transformers' check for the tag): blanks left out at the span's start.
        """
        s = self.structure
        open_right = self._right(start)[1]
        if open_right != "+":
            return start, self._left(start), open_right
        data = s.data_at_start[start]
        after = s.tag_at_start.get(data.span.end)
        if not data.text.strip() and after is not None and after.strip_left:
            return start, "", ""  # blanks the tag after strips whole: what trim_blocks takes makes no difference
        return start + len(data.text) - len(data.text.lstrip("\n")), "", ""

    def _left(self, at: int) -> str:
        """The left marker for a block tag put just before the tag starting at ``at``: the same stripping of the text before it."""
        tag = self.structure.tag_at_start.get(at)
        if tag is None or at not in self.structure.data_at_end:
            return ""
        if tag.strip_left:
            return "-"
        if tag.keep_left or tag.name == "{{":
            return "+"
        return ""

    def _right(self, at: int) -> tuple[str, str]:
        """(left, right) markers for a block tag put just after ``at``: what the delimiters around it did to the text."""
        s = self.structure
        before, after = s.tag_at_end.get(at), s.tag_at_start.get(at)
        left = ""
        if at in s.data_at_end and after is not None:  # text, then the tag that followed it
            left = "-" if after.strip_left else "+" if (after.keep_left or after.name == "{{") else ""
        right = ""
        if before is not None and at in s.data_at_start:  # a tag, then the text after it
            right = "-" if before.strip_right else "+" if (before.keep_right or before.name == "{{") else ""
        return left, right

    # verification

    def verify(self, copy: str, conversations: list) -> str | None:
        """What went wrong with the tagged copy, or None."""
        try:
            parse(copy, max_source_chars=None, max_source_tokens=None)
        except Exception as exc:  # noqa: BLE001
            return f"the copy does not parse ({exc})"
        checks: list[tuple[list, dict, bool]] = [(c, {}, True) for c in conversations]
        probe_needle = self.needles.new()
        for messages, kwargs in probe_conversations(probe_needle).values():
            checks.append((messages, kwargs, False))
        seed = random.Random(len(self.source))
        for _ in range(_RANDOM_CONVERSATIONS):
            random_messages = _random_conversation(seed, self.needles)
            checks.append((_chunked(random_messages) if self.chunked else random_messages, {}, True))
        for messages, kwargs, needled in checks:
            expected, error = self.render(self.source, messages, **kwargs)
            got, copy_error = self.render(copy, messages, spans=True, **kwargs)
            if error is not None or copy_error is not None:
                if error != copy_error:
                    return f"the original gives {error or 'text'} and the copy {copy_error or 'text'}"
                continue
            text, spans = got
            if text != expected:
                at = len(_common_prefix(text, expected))
                return (f"the copy renders different text from offset {at}: {expected[max(0, at - 20):at + 20]!r} in the "
                        f"original, {text[max(0, at - 20):at + 20]!r} in the copy")
            if needled:
                problem = _misplaced(text, spans, messages, self.header_text)
                if problem is not None:
                    return problem
        return None


def _assistant_branch(structure: _Structure, key: tuple) -> bool:
    """Whether the body ``key`` is the branch of an ``if``/``elif`` whose test names the assistant role."""
    owner = structure.nodes.get(key[0])
    if not isinstance(owner, (A.If, A.Elif)) or key[1] != "body":
        return False
    return any(isinstance(n, A.Const) and n.value == "assistant" for n in walk(owner.test))


def _assigns(stmt: A.Node) -> bool:
    """Whether ``stmt`` sets a plain name outside loops and macros (which keep their sets)."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (A.Set, A.SetBlock)) and any(isinstance(t, A.Name) for t in walk(node.target)):
            return True
        if not isinstance(node, _SCOPED):
            stack.extend(_children(node))
    return False


def _captured_outputs(tree: A.Template) -> set[int]:
    """The ``{{ }}`` inside macros, call blocks, filter blocks and ``{% set %}`` captures."""
    found: set[int] = set()
    for node in walk(tree):
        if isinstance(node, (A.Macro, A.CallBlock, A.FilterBlock, A.SetBlock)):
            found.update(id(n) for n in walk(node) if isinstance(n, A.Output))
    return found


def _children(node: A.Node) -> Iterator[A.Node]:
    for _, value in iter_fields(node):
        if isinstance(value, A.Node):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, A.Node))


def _common_prefix(a: str, b: str) -> str:
    at = 0
    for x, y in zip(a, b):
        if x != y:
            break
        at += 1
    return a[:at]


def _end_piece(top: list[_Piece], start: _Piece, last: int, turn_end: int | None) -> _Piece:
    """The last output piece of the turn: the last one starting before the turn's end (or the content's)."""
    limit = turn_end if turn_end is not None else last
    limit = max(limit, last)
    chosen = start
    for piece in top:
        if piece.start >= limit:
            break
        if piece.start >= start.start and piece.end > piece.start:
            chosen = piece
    return chosen


def _foreign_sites(clean: str, top: list[_Piece], messages: list) -> set[int]:
    """The outputs whose printed text holds a needle of a message other than an assistant's."""
    return {p.output for p in top for m in messages if m["role"] != "assistant"
            for x in _message_needles(m) if x in clean[p.start:p.end]}


def _merged(ranges: list[_Range]) -> list[_Range]:
    """One range per run of overlapping ranges in a body; ranges inside another's statements dropped."""
    by_key: dict[tuple, list[_Range]] = {}
    for r in ranges:
        by_key.setdefault(r.key, []).append(r)
    merged: list[_Range] = []
    for group in by_key.values():
        group.sort(key=lambda r: (r.first, -r.operand, -r.cut))
        current = group[0]
        for r in group[1:]:
            if r.first <= current.last:
                if r.first == current.first:
                    current.operand, current.cut = min((current.operand, current.cut), (r.operand, r.cut))
                current.last = max(current.last, r.last)
                current.conditional = current.conditional or r.conditional
            else:
                merged.append(current)
                current = r
        merged.append(current)
    spans = [(r.body[r.first].span.start, r.body[r.last].span.end) for r in merged]
    kept = []
    for r, (a, b) in zip(merged, spans):
        if not any((c < a and b <= d) or (c <= a and b < d) for c, d in spans):
            kept.append(r)
    kept.sort(key=lambda r: r.body[r.first].span.start)
    for x, y in zip(kept, kept[1:]):
        if x.body[x.last].span.end > y.body[y.first].span.start:
            raise GenerationTagsRefused("the statements of two assistant turns overlap")
    return kept


def _misplaced(text: str, spans: list[tuple[int, int]], messages: list, header: str = "") -> str | None:
    """Each assistant needle in a span (one message per span); no other message's needle in any span."""
    owners: dict[int, int] = {}
    for index, message in enumerate(messages):
        for needle in _message_needles(message):
            at, placed = text.find(needle), False
            present = at >= 0
            while at >= 0:
                inside = [k for k, (a, b) in enumerate(spans) if a <= at and at + len(needle) <= b]
                if inside and message["role"] != "assistant":
                    return f"{message['role']} text inside a generation span (message {index})"
                for k in inside:
                    placed = True
                    if owners.setdefault(k, index) != index:
                        return "one generation span holds two assistant messages"
                at = text.find(needle, at + 1)
            if present and message["role"] == "assistant" and not placed and not _shared(needle, messages, index):
                return f"assistant text outside every generation span (message {index})"
    return _stray(text, spans, messages, header)


def _stray(text: str, spans: list[tuple[int, int]], messages: list, header: str) -> str | None:
    """A span that holds no needle and follows another message's text (that turn's end marker) before the role header
    of the assistant message after it (if any), when every assistant message printed its own: template text of another
    role's turn marked as the model's."""
    placed: list[tuple[int, int]] = []  # (needle position, message index)
    for index, message in enumerate(messages):
        needles = _message_needles(message)
        found = [text.find(x) for x in needles]
        if message["role"] == "assistant" and (not needles or min(found) < 0):
            return None  # an assistant message that prints nothing of its own: its marker may follow anything
        placed.extend((at, index) for at in found)
    placed.sort()
    for a, b in spans:
        if not text[a:b].strip() or any(a <= at < b for at, _ in placed):
            continue
        before = [(at, index) for at, index in placed if at < a]
        after = [(at, index) for at, index in placed if at >= b]
        if after and messages[after[0][1]]["role"] == "assistant":
            # before an assistant's text: the span is that turn's when it starts after its role header
            gap_start = before[-1][0] if before else 0
            at = text.rfind(header, gap_start, after[0][0]) if header else -1
            if at < 0 or a >= at + len(header):
                continue
        before = [index for _, index in before]
        if before and messages[before[-1]]["role"] != "assistant":
            return f"{messages[before[-1]]['role']} turn's text inside a generation span (after message {before[-1]})"
    return None


def _shared(needle: str, messages: list, index: int) -> bool:
    """Whether another message holds ``needle`` too (a tool result names the call it answers)."""
    return any(needle in (m.get("name"), m.get("content")) for k, m in enumerate(messages) if k != index)


def _chunked(messages: list) -> list:
    """The conversation with each non-empty string content as one text chunk."""
    return [{**m, "content": [{"type": "text", "text": m["content"]}]} if isinstance(m.get("content"), str) and m["content"]
            else m for m in messages]


def _message_needles(message: dict) -> list[str]:
    found = []
    for key in ("content", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value = value[0].get("text")
        if isinstance(value, str) and value.startswith("Nd"):
            found.append(value)
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        name = function.get("name")
        if isinstance(name, str) and name.startswith("Nd"):
            found.append(name)
    return found


class _Needles:
    """Unique strings that the template's source does not contain."""

    def __init__(self, source: str):
        self.source = source
        self.count = 0

    def new(self) -> str:
        while True:
            self.count += 1
            needle = f"Nd{self.count}q{self.count * 7919 % 997}z"
            if needle not in self.source:
                return needle


def _random_conversation(rng: random.Random, needles: _Needles) -> list:
    messages: list[dict] = []
    if rng.random() < 0.4:
        messages.append({"role": "system", "content": needles.new()})
    for turn in range(rng.randint(1, 3)):
        messages.append({"role": "user", "content": needles.new()})
        if rng.random() < 0.3:
            name = needles.new()
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": f"call{turn}", "type": "function", "function": {"name": name, "arguments": {"x": turn}}}]})
            messages.append({"role": "tool", "tool_call_id": f"call{turn}", "name": name, "content": needles.new()})
        assistant = {"role": "assistant", "content": needles.new()}
        if rng.random() < 0.3:
            assistant["reasoning_content"] = needles.new()
        messages.append(assistant)
    if rng.random() < 0.5:
        messages.append({"role": "user", "content": needles.new()})
    return messages


def _pieces(marked: str) -> tuple[str, list[_Piece]]:
    """The text without markers, and every operand piece found in it."""
    clean: list[str] = []
    pos = 0
    last = 0
    stack: list[list[int]] = []
    pieces: list[_Piece] = []
    for match in _MARKERS.finditer(marked):
        at = match.start()
        if at < last:
            continue
        if len(pieces) >= MAX_PIECES:
            raise GenerationTagsBudgetExceeded("max_pieces", MAX_PIECES, f"a render of the marked copy prints more than {MAX_PIECES} operands")
        chunk = marked[last:at]
        clean.append(chunk)
        pos += len(chunk)
        if marked[at] == _OPEN:
            sep = marked.index(_SEP, at)
            k, j = (int(x) for x in marked[at + 1:sep].split("."))
            if j > 0 and stack and stack[-1][0] == k:
                top = stack[-1]
                pieces.append(_Piece(k, top[1], top[2], pos, len(stack) - 1))
                top[1], top[2] = j, pos
            else:
                stack.append([k, j, pos])
            last = sep + 1
        else:
            if stack:
                top = stack.pop()
                pieces.append(_Piece(top[0], top[1], top[2], pos, len(stack)))
            last = at + 1
    clean.append(marked[last:])
    pieces.sort(key=lambda p: (p.start, p.depth))
    return "".join(clean), pieces


def _whole_tokens(prefix: str) -> str:
    """``prefix`` without a control token it cuts in two at its end (``<assistant>\\n<`` -> ``<assistant>\\n``)."""
    for opening, closing in (("<", ">"), ("[", "]")):
        at = prefix.rfind(opening)
        if at >= 0 and closing not in prefix[at:]:
            prefix = prefix[:at]
    return prefix


def _literal(value: str) -> str:
    """A Jinja string literal for ``value`` (Jinja decodes the JSON escapes the same way)."""
    return json.dumps(value, ensure_ascii=False)


def _is_string(expr: A.Expr) -> bool:
    return isinstance(expr, A.Const) and isinstance(expr.value, str)


def _parses(expression: str) -> bool:
    try:
        parse("{{ (" + expression + ") }}", max_source_chars=None, max_source_tokens=None)
    except Exception:  # noqa: BLE001
        return False
    return True


def _apply(source: str, edits: list[tuple[int, int, str]]) -> str:
    out, at = [], 0
    for start, end, text in sorted(edits):
        if start < at:
            raise GenerationTagsRefused("two rewrites of the template overlap")
        out.append(source[at:start])
        out.append(text)
        at = end
    out.append(source[at:])
    return "".join(out)
