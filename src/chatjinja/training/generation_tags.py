"""Synthesise ``{% generation %}`` tags: a copy of a chat template that marks what the model writes in each assistant turn.

How (docs/guide/training.md, "Generation tags"): the template is parsed (``chatjinja.parse``, the
static budgets apply) and an instrumented copy, whose every ``{{ }}`` prints markers around each
operand of its top-level ``+``/``~`` chain, renders conversations with unique needle strings: the
tagger's own, and the conversation space's client shapes with a needle in each text (null content
beside calls, JSON-string arguments, text parts, reasoning on earlier turns and before a call), in
the default mode and in each mode variant (``chatjinja.analysis.modes``) whose renders take other
paths through the template (the provenance render says which output sites printed what). The markers
say which output site printed each assistant message's content, reasoning and tool calls, where the
role header ends (the header ``add_generation_prompt=True`` writes in any mode, whichever ends last,
and at least past the message's printed role; a reasoning opener the prompt writes is the model's),
and where the turn ends (the render of the conversation cut after that message). Each turn becomes a
run of sibling statements in the AST (one run per level when it starts inside a nested block), its
first ``{{ }}`` split after the header when header and content share one expression; statements that
every role runs are duplicated under ``{% if <message>['role'] == 'assistant' %}`` (``<message>`` the
loop variable whose role the template reads); output of other messages inside a turn and, when a
later statement reads a name the turn sets, the ``{% set %}`` statements are left between blocks (a
generation block is a call block, which keeps its assignments). A run that holds another turn's start
leaves that turn's role header out (each body on the way to it covered from there on). Templates that
print only text-chunk content are measured with chunks. A header that ends inside a string constant
splits the constant; template text after the header right before the turn's first output (a
``<think>``) joins the run; an end-of-turn marker written as template text after the content's loop
joins the turn; a ``{{ }}`` that printed part of a turn outside its run (a second tool call's branch)
gets a block of its own; a run whose first statement prints the role header in another conversation
(an ``{% if %}`` whose ``else`` prints the prompt's ``</think>``) starts inside it instead, when that
copy verifies.

The copy is then verified in the default mode and in every mode variant, on the conversations the
turns were located with, the conversation space's members of that mode and seeded random
conversations: identical text (or the same error), and (:mod:`chatjinja.training.tag_check`) each
assistant message's reasoning, content and calls inside a span, its role header and every other
message's text outside, read from the original's provenance render and from the needles. Anything
else is a refusal (:class:`GenerationTagsRefused`, whose message is the reason; the retries read the
kind of the problem, never its words). A refusal is never a wrong copy.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..analysis.modes import MAX_MODE_VARIANTS, mode_variants, variant_name
from ..errors import ChatJinjaError
from ..observation import MARKER, MARKER_START, PROBE_BUDGETS, Outcome, common_prefix, render_text, space_of
from ..observation.render import SPECIAL_TOKENS, error_text
from ..observation.text import without_partial_marker
from ..runtime.budget import BudgetExceeded, Spending, resolve_budgets
from ..syntax import parse
from ..syntax import ast as A
from ..syntax.visitor import iter_fields, walk
from .tag_check import OTHER_INSIDE, Needles, Problem, header_in_span, message_needles, misplaced_needles, misplaced_origins, random_conversation

__all__ = ["CALL_BUDGETS", "MAX_RENDERS", "REFUSAL_KINDS", "GenerationTagsBudgetExceeded", "GenerationTagsRefused", "add_generation_tags"]

#: the most renders one call makes (original, instrumented copy and tagged copy together). Verifying in every mode
#: costs renders: the copy is checked on the space's members in the default mode and in each of at most
#: MAX_MODE_VARIANTS mode variants, the turns are located in each variant whose renders take other paths, so a
#: template with eight mode variants needs up to about 950 (the corpus's most: 933, gpt-oss; median 151)
MAX_RENDERS = 1500
#: the budget of one call for all its renders together (docs/reference/budgets.md, "One call of
#: generation-tags"): the characters they print, their fuel (``max_steps`` counts it the same way) and
#: a clock backstop, in seconds. Each render also runs under the probe budgets (``PROBE_BUDGETS``), its
#: limits lowered to what the call has left. The corpus needs at most an eighth of the output (3.99 M
#: characters, Command A reasoning in its thirteen modes), 2 % of the fuel and an eighth of the time.
CALL_BUDGETS = {"total_output_chars": 32 * 1024 * 1024, "total_steps": 5_000_000, "total_seconds": 10.0}
#: what one render of the instrumented copy may print: operand markers (``_pieces`` makes an object of each)
MAX_PIECES = 100_000
#: a render's text (or error) is kept for the same render asked again only up to this many characters;
#: a longer one is rendered again, and charged again, when it is needed twice
KEEP_CHARS = 64 * 1024
#: and the renders kept together weigh at most this much (a character 1, a provenance segment 8): past it, a
#: render asked again is rendered again
KEEP_TOTAL = 16 * 1024 * 1024
_PER_RENDER = resolve_budgets(PROBE_BUDGETS)
_OPEN, _SEP, _CLOSE = "\ue000", "\ue001", "\ue002"
_MARKERS = re.compile("[\ue000\ue002]")
_RANDOM_CONVERSATIONS = 8
#: seeded random conversations the copy is checked on in each mode variant (the default mode has its eight)
_RANDOM_PER_MODE = 2
#: the shapes of the conversation space the turns are also located with (with a needle in each text): the string
#: arguments, null content beside calls, text before a call, text parts, reasoning on earlier turns and before a call
LOCATING_SHAPES = ("round_trip_string", "parallel_string", "client_calls_null_content", "client_call_with_text", "client_text_parts",
                   "client_reasoning_history", "client_reasoning_before_call")
_OTHER_ROLES = frozenset({"system", "user", "tool", "developer", "ipython", "function", "tool_response"})
_SCOPED = (A.For, A.Macro, A.CallBlock, A.FilterBlock, A.SetBlock, A.With, A.Block)


#: the kinds of :class:`GenerationTagsRefused` (``exc.kind``; callers decide on the kind, never on the words)
RESERVED = "reserved characters"  # the template holds the private-use characters the analysis marks output with
NOT_RENDERED = "not rendered"  # the template renders no conversation with an assistant answer
NOT_LOCATED = "not located"  # no assistant turn is found in the output
ONE_EXPRESSION = "one expression"  # a turn's role header and its text are printed by one unsplittable expression
UNSPLITTABLE = "unsplittable"  # the expression or string a header would be split off cannot be split safely
STRUCTURE = "structure"  # a turn starts and ends in different parts of the template, or prints other messages
LOOP_CONTROL = "loop control"  # a turn leaves its loop with {% break %} or {% continue %}
OVERLAP = "overlap"  # the statements of turns overlap, however finely cut
INSTRUMENTATION = "instrumentation"  # the marked copy does not parse or fails where the template renders
VERIFICATION = "verification"  # the tagged copy failed verification (``exc.problem`` is the :class:`Problem`)
BUDGET = "budget"  # the call's budget (:class:`GenerationTagsBudgetExceeded`)
REFUSAL_KINDS = (RESERVED, NOT_RENDERED, NOT_LOCATED, ONE_EXPRESSION, UNSPLITTABLE, STRUCTURE, LOOP_CONTROL, OVERLAP,
                 INSTRUMENTATION, VERIFICATION, BUDGET)


class GenerationTagsRefused(ChatJinjaError, ValueError):
    """``add_generation_tags`` cannot tag this template safely; the message is the reason, ``kind`` (one of
    :data:`REFUSAL_KINDS`) which check refused it, and ``problem`` for a failed verification what it found."""

    problem: Problem | None = None

    def __init__(self, message: str, kind: str, *, source_name: str | None = None):
        super().__init__(message, source_name=source_name)
        self.kind = kind

    def __reduce__(self) -> tuple:
        return _refused, (type(self), str(self), self.__dict__)


def _refused(cls: type, message: str, state: dict) -> "GenerationTagsRefused":
    exc = GenerationTagsRefused.__new__(cls)
    ValueError.__init__(exc, message)
    exc.__dict__.update(state)
    return exc


class GenerationTagsBudgetExceeded(GenerationTagsRefused):
    """The renders of one call together crossed a budget of :data:`CALL_BUDGETS` (``budget``, ``limit``)
    or :data:`MAX_RENDERS` / :data:`MAX_PIECES`; the message names it."""

    def __init__(self, budget: str, limit: Any, detail: str):
        super().__init__(f"budget {budget} of the call exceeded (limit {limit}): {detail}", BUDGET)
        self.budget = budget
        self.limit = limit


class _Overlap(GenerationTagsRefused):
    """Two blocks overlap, or a block would keep an assignment a later statement reads: a finer cut may not."""

    def __init__(self, message: str, kind: str = OVERLAP):
        super().__init__(message, kind)


class _SelfReading(GenerationTagsRefused):
    """The marked copy rendered other text than the template (its own output is read back)."""

    def __init__(self, message: str, kind: str = INSTRUMENTATION):
        super().__init__(message, kind)


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
        raise GenerationTagsRefused("the template contains the private-use characters U+E000-U+E002 the analysis marks output with", RESERVED)
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
        self.rendered: dict[tuple, tuple[Any, Any]] = {}  # renders of at most KEEP_CHARS characters
        self.kept = 0  # what the kept renders weigh (KEEP_TOTAL)
        self.budget = _CallBudget()
        self.foreign: set[int] = set()  # the {{ }} that print another message's text in some conversation
        self.splits: dict[int, tuple[str | None, list[tuple[int, int]]]] = {}
        self.needles = Needles(source)
        self.loose: dict[_Piece, _Piece] = {}  # a start piece -> the first operand the run may start at instead
        self.cuts: dict[_Piece, int] = {}  # a start piece that is a string constant -> where the role header ends in it
        self.fine: bool | frozenset = False  # blocks leave out the turn's {% set %} statements (of these names)
        self.escaping: set[str] = set()  # names a turn sets that a statement after it reads
        self.elsewhere: set[tuple[int, int]] = set()  # (output, operand) that printed outside every assistant turn
        self.inside: set[int] = set()  # the outputs that printed inside an assistant turn
        self.only_elsewhere: set[int] = set()  # outputs carved out of the runs like another message's
        self.chunked = False  # the conversations give content as [{"type": "text", "text": ...}]
        self.shallow = False  # the copy is instrumented outside macros and captures only
        self.header_sites: set[int] = set()  # the {{ }} that print part of an assistant turn's role header
        self.lower: set[tuple] = set()  # (body key, index) of statements a turn's run starts inside of, not at
        self.gaps: dict[_Piece, str] = {}  # a start piece -> the text between the role header's end and it
        self.reasoning_conversation: list = []  # [user, assistant with reasoning] (the prompt's reasoning opener)
        self.mode: tuple = ()  # the mode variables the renders are in (default: every mode variable unset)
        self.headers: dict[tuple, str] = {}  # the role header in each mode read
        self.space = space_of(source)
        self.variants = [tuple(v) for v in mode_variants(self.space.modes)[:MAX_MODE_VARIANTS]]

    # rendering, counted

    def render(self, template: str, messages: list, spans: bool = False, traced: bool = False,
               variables: tuple | None = None, plain: bool = False, **kwargs: Any) -> tuple[Any, Any]:
        """``(text, None)`` (``(text, spans)`` with ``spans``, ``(text, provenance)`` with ``traced``) or ``(None, "Type:
        message")``, under what is left of the call's budget. ``variables`` are the mode's template variables (default:
        the mode being read, :attr:`mode`); ``kwargs`` render parameters (``tools=``, ``add_generation_prompt=``).
        A plain render's text is taken from a traced render of the same kept before, unless ``plain``."""
        variables = self.mode if variables is None else variables
        key = (template, repr(messages), spans, traced, repr(variables), repr(sorted(kwargs.items())))
        kept = self.rendered.get(key)
        if kept is not None:  # the same render asked again (locating and the foreign sites share them)
            return kept
        if not spans and not traced and not plain:  # a traced render of the same gives the same text
            kept = self.rendered.get(key[:3] + (True,) + key[4:])
            if kept is not None and kept[1] is None:  # (a traced render's error is not the template's: see check)
                return kept[0][0], None
        self.renders += 1
        if self.renders > MAX_RENDERS:
            raise GenerationTagsBudgetExceeded("max_renders", MAX_RENDERS, f"the analysis needs more than {MAX_RENDERS} renders")
        budgets, lowered = self.budget.for_render()
        spending = Spending()
        try:
            with spending:
                rendered = render_text(template, messages, variables=dict(variables), spans=spans, traced=traced,
                                       budgets=budgets, reraise=(BudgetExceeded,), output_limit=None, **kwargs)
        except BudgetExceeded as exc:
            if exc.budget in lowered:  # stopped by what the call had left, not by the render's own budget
                self.budget.charge(spending, 0)
                raise self.budget.exceeded(lowered[exc.budget]) from None
            rendered = Outcome(None, error_text(exc))
        if rendered.ok:
            result: Any = (rendered.text, rendered.spans) if spans else (rendered.text, rendered.provenance) if traced \
                else rendered.text
            outcome: tuple[Any, Any] = (result, None)
        else:
            outcome = (None, rendered.error)
        size = len(outcome[1]) if outcome[1] is not None else len(rendered.text or "")
        self.budget.charge(spending, size if outcome[1] is None else 0)
        segments = len(rendered.provenance.segments) if rendered.provenance is not None else 0
        weight = size + 8 * segments
        if size <= KEEP_CHARS and self.kept + weight <= KEEP_TOTAL:  # else asked again, it is rendered again
            self.rendered[key] = outcome
            self.kept += weight
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
            raise GenerationTagsRefused("the instrumented copy of the template does not parse", INSTRUMENTATION) from None
        return text

    def run(self) -> str:
        n = self.needles
        m1, m2, a1, a2, r1, f1, g1, t1 = (n.new() for _ in range(8))
        user, user2 = {"role": "user", "content": m1}, {"role": "user", "content": m2}
        call = {"id": "call0", "type": "function", "function": {"name": f1, "arguments": {"arg": g1}}}
        f2, t2, r2, r3, r4 = n.new(), n.new(), n.new(), n.new(), n.new()
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
        # and, like the space's client shapes, located where they render: reasoning before a call whose arguments are an
        # object (the client shape has them as a JSON string, which templates that iterate over them reject; Seed-OSS
        # prints it by the calls' own branch), then an answer with reasoning after the results (DeepSeek-V3.2 prints it
        # without a role header in thinking mode)
        reasoning_call = [user, {"role": "assistant", "content": "", "reasoning_content": r3, "tool_calls": [call]},
                          {"role": "tool", "tool_call_id": "call0", "name": f1, "content": t1},
                          {"role": "assistant", "content": a2, "reasoning_content": r4}]
        basic, error = self.render(self.source, conversations[1])
        if error is not None or a1 not in basic:  # a template for content given as a list of text chunks?
            chunked, chunked_error = self.render(self.source, _chunked(conversations[1]))
            if chunked_error is None and a1 in chunked:
                self.chunked = True
                conversations = [_chunked(c) for c in conversations]
                user = conversations[0][0]
            elif error is not None:
                raise GenerationTagsRefused(f"the template does not render [user, assistant, user]: {error[:200]}", NOT_RENDERED)
            else:
                raise GenerationTagsRefused("the template renders no assistant message content", NOT_RENDERED)
        self.user = user
        self.reasoning_conversation = conversations[2]
        self.client_conversations = [reasoning_call, *(_needled(self.space.named(name).messages, n) for name in LOCATING_SHAPES)]
        if self.chunked:
            self.client_conversations = [_chunked(c) for c in self.client_conversations]
        header = self.header(user)
        try:
            instrumented = self.instrumented()
            ranges = self.located(instrumented, conversations, header)
        except _SelfReading:  # markers in a macro's or a capture's output changed what the template did with it
            self.shallow = True
            instrumented = self.instrumented(shallow=True)
            ranges = self.located(instrumented, conversations, header)
        if not ranges:
            raise GenerationTagsRefused("no assistant turn could be located in the output", NOT_LOCATED)
        try:
            ranges = _merged(ranges, self.header_outputs())
            copy = self.rewrite(ranges)
        except _Overlap:
            # a finer cut: the {% set %} statements of a turn whose names a later statement reads stay outside its
            # blocks (they print nothing; more such names may show on the way), and failing that every {% set %}
            for _ in range(4):
                self.fine = frozenset(self.escaping) or True
                try:
                    ranges = _merged(self.located(instrumented, conversations, header), self.header_outputs())
                    copy = self.rewrite(ranges)
                    break
                except _Overlap:
                    if self.fine is True:
                        raise
                    if self.fine == self.escaping:
                        self.escaping = set()  # no new name: every {% set %}
            else:
                raise GenerationTagsRefused("the statements of assistant turns overlap, however finely cut", OVERLAP)
        lowered = self.lowered(ranges, instrumented, conversations, header)
        if lowered is not None:
            return lowered
        failure = self.verify(copy, conversations)
        if getattr(failure, "kind", None) == OTHER_INSIDE and not all(r.conditional for r in ranges):
            # another message's text inside a span: first the statements that printed only outside the assistant
            # turns are carved out like another message's output (the user's branch of an end marker), then the runs
            # whose statements print outside the turns too go under a role test, and failing that every run
            carved = self.recarved(instrumented, conversations, header)
            if carved is not None:
                return carved
            shared = [r for r in ranges if not r.conditional and self.prints_elsewhere(r)]
            for attempt in ([shared] if shared and len(shared) < len(ranges) else []) + [ranges]:
                for r in attempt:
                    r.conditional = True
                copy = self.rewrite(ranges)
                failure = self.verify(copy, conversations)
                if getattr(failure, "kind", None) != OTHER_INSIDE:
                    break
        if failure is not None:
            refusal = GenerationTagsRefused(f"the tagged copy failed verification: {failure}", VERIFICATION)
            refusal.problem = failure if isinstance(failure, Problem) else None
            raise refusal
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
            copy = self.rewrite(_merged(self.located(instrumented, conversations, header), self.header_outputs()))
        except GenerationTagsRefused:
            copy = None
        self.lower = set()
        if copy is None or self.verify(copy, conversations) is not None:
            return None
        return copy

    def located(self, instrumented: str, conversations: list, header: str) -> list[_Range]:
        """The statement runs of every assistant turn of ``conversations``: in the default mode (``header`` its role
        header), in the default mode on the space's client shapes, and in each mode variant whose renders differ from
        the default's. Outside the default mode's own conversations, a conversation that cannot be located is left to
        the verification (which renders it on the copy).

        A turn starts after the role header of any mode that ends latest there: what the generation prompt writes in
        one mode is never the model's (GLM's prompt writes ``<|assistant|></think>`` with ``enable_thinking=false``, and
        its turns without reasoning print that ``</think>`` in every mode)."""
        headers = (header, *(self.mode_header(variables) for variables in self.variants))
        ranges = self.located_in(instrumented, conversations, headers, tolerant=False)
        ranges += self.located_in(instrumented, self.client_conversations, headers, tolerant=True)
        everything = conversations + self.client_conversations
        for variables in self.variants:
            self.mode = variables
            try:
                if any(self.path_of(c) != self.path_of(c, ()) for c in everything):
                    ranges += self.located_in(instrumented, everything, headers, tolerant=True)
            finally:
                self.mode = ()
        return ranges

    def mode_header(self, variables: tuple) -> str:
        """The role header in the mode ``variables``."""
        mode, self.mode = self.mode, variables
        try:
            return self.header(self.user)
        finally:
            self.mode = mode

    def path_of(self, messages: list, variables: tuple | None = None) -> tuple | None:
        """Which output sites printed which stretch of the original's render (its provenance), None when it fails: two
        modes that print the same text by other statements (Solar Open prints the last reasoning by one branch when
        ``think_render_option`` is unset and by another when it is ``'all'``) are read apart."""
        traced, _ = self.render(self.source, messages, traced=True, variables=variables)
        return None if traced is None else (traced[0], tuple((a, b, site) for a, b, site, _ in traced[1].segments))

    def text_of(self, messages: list, variables: tuple | None = None) -> str | None:
        """The text of the original's (traced) render, None when it fails."""
        traced, _ = self.render(self.source, messages, traced=True, variables=variables)
        return None if traced is None else traced[0]

    def located_in(self, instrumented: str, conversations: list, header: str | tuple, tolerant: bool) -> list[_Range]:
        # first the {{ }} that print another message's text in any conversation (a tool result printed inside the
        # assistant's turn): the turns of every conversation are carved around all of them, so the merged blocks
        # hold none of them
        usable = []
        for messages in conversations:
            try:
                marked = self.marked(instrumented, messages)
            except GenerationTagsBudgetExceeded:
                raise
            except GenerationTagsRefused as refusal:  # (a self-reading copy is tried shallow, for the others too)
                if not tolerant or (isinstance(refusal, _SelfReading) and not self.shallow):
                    raise
                continue
            if marked is not None:
                clean, pieces = marked
                self.foreign |= _foreign_sites(clean, [p for p in pieces if p.depth == 0], messages)
                usable.append(messages)
        ranges: list[_Range] = []
        for messages in usable:
            try:
                ranges.extend(list(self.turn_ranges(instrumented, messages, header)))
            except GenerationTagsBudgetExceeded:
                raise
            except GenerationTagsRefused as refusal:
                if not tolerant or (isinstance(refusal, _SelfReading) and not self.shallow):
                    raise
        return ranges

    def header(self, user: dict) -> str:
        """The non-blank text ``add_generation_prompt=True`` adds after ``[user]`` ("" when none), in the mode read."""
        if self.mode in self.headers:
            return self.headers[self.mode]
        self.headers[self.mode] = found = self.prompt_header(user)
        return found

    def prompt_header(self, user: dict) -> str:
        off, _ = self.render(self.source, [user])
        on, _ = self.render(self.source, [user], add_generation_prompt=True)
        if off is None or on is None:
            return ""
        prefix = common_prefix(on, off)
        cut = MARKER_START.search(on[:prefix])  # not from inside a control token both texts start ("<|" of two)
        prefix = cut.start() if cut is not None else prefix
        suffix = common_prefix(on[prefix:][::-1], off[prefix:][::-1])
        end = len(on) - suffix
        for marker in MARKER.finditer(on, max(0, end - 64)):  # nor up to inside one both end with
            if marker.start() < end < marker.end():
                end = marker.start()
                break
        header = on[prefix:end].strip()
        # a reasoning block the prompt opens is the model's to write: the header is what comes before it
        header = header.split("<think>")[0].strip() or header
        return self.without_opener(header)

    def without_opener(self, header: str) -> str:
        """``header`` without the reasoning opener it ends with: the longest end of it, from a control token on, that a
        turn with reasoning prints right before the reasoning (Command A's ``<|START_THINKING|>``, which its prompt
        writes and its turns print before the reasoning, in the mode read)."""
        messages = self.reasoning_conversation
        if not messages:
            return header
        text = self.text_of(messages)
        reasoning = messages[-1].get("reasoning_content")
        if text is None or not isinstance(reasoning, str) or reasoning not in text:
            return header
        at = text.find(reasoning)
        before = text[:at].rstrip()
        for start in range(1, len(header)):
            if header[start] in "<[" and before.endswith(header[start:].rstrip()):
                return header[:start].strip() or header
        return header

    def marked(self, instrumented: str, messages: list) -> tuple[str, list[_Piece]] | None:
        """The clean text and output pieces of the instrumented render (None when the template fails on ``messages``)."""
        original, error = self.render(self.source, messages, traced=True)
        if error is not None:
            return None
        original = original[0]
        marked, error = self.render(instrumented, messages)
        if error is not None:
            raise GenerationTagsRefused(f"the instrumented copy fails where the template renders: {error[:200]}", INSTRUMENTATION)
        clean, pieces = _pieces(marked)
        if clean != original:  # (the traced render's text is the template's; the plain render says so when it is not)
            original, _ = self.render(self.source, messages, variables=self.mode, plain=True)
        if clean != original:
            raise _SelfReading("the template's output depends on the text of its own output (instrumented copy differs)")
        return clean, pieces

    def turn_ranges(self, instrumented: str, messages: list, header: str | tuple) -> Iterator[_Range]:
        found = self.marked(instrumented, messages)
        if found is None:
            return
        clean, pieces = found
        top = [p for p in pieces if p.depth == 0]
        previous_end = 0
        regions: list[tuple[int, int]] = []  # where the assistant turns are, from their start to their end
        for index, message in enumerate(messages):
            needles = [x for x in message_needles(message) if x in clean[previous_end:]]
            if not needles:
                continue
            positions = sorted(clean.index(x, previous_end) for x in needles)
            first = positions[0]
            last = max(clean.index(x, previous_end) + len(x) for x in needles)
            if message["role"] != "assistant":
                previous_end = last
                continue
            start = self.start_piece(clean, top, previous_end, first, header, self.role_end(messages, index, previous_end, first))
            if start is None:
                site = next((p for p in top if p.start <= first < p.end), None)
                where = f" (line {self.structure.outputs[site.output].span.line})" if site else ""
                raise GenerationTagsRefused(
                    "an assistant turn's role header and its content are printed by one expression that cannot be "
                    f"split without changing what it renders{where}", ONE_EXPRESSION)
            turn_end = self.turn_end(messages, index, clean)
            loop = self.loop_of(start)
            own = top if loop is None else [p for p in top if loop.span.start <= self.structure.outputs[p.output].span.start < loop.span.end]
            end = _end_piece(own, start, last, turn_end)
            user_sites = self.foreign | _foreign_sites(clean, top, messages) | self.only_elsewhere
            content_site = next((p.output for p in top if p.start <= first < p.end), start.output)
            tail = clean[end.end:turn_end] if turn_end is not None and turn_end > end.end else ""
            ranges = self.range_of(start, end, turn_end, user_sites, content_site in user_sites, tail)
            between = [p for p in top if start.end <= p.start and p.end <= end.start and p.output not in user_sites
                       and clean[p.start:p.end].strip()]
            yield from ranges + self.uncovered(ranges, between)
            regions.append((start.start, max(turn_end or 0, end.end)))
            previous_end = last
        # the operands that print outside every assistant turn (other roles' text, headers, the system prompt), and
        # the outputs that print inside one
        for p in top:
            if clean[p.start:p.end].strip():
                if any(a <= p.start and p.end <= b for a, b in regions):
                    self.inside.add(p.output)
                else:
                    self.elsewhere.add((p.output, p.operand))

    def role_end(self, messages: list, index: int, start: int, end: int) -> int | None:
        """Where the message's role, printed from ``messages[index]['role']`` between ``start`` and ``end``, ends in the
        render (the provenance render says so), or None: the role header goes at least that far."""
        traced, _ = self.render(self.source, messages, traced=True)
        if traced is None:
            return None
        ends = [b for a, b, path, _ in traced[1].origins() if tuple(path[:3]) == ("messages", index, "role") and start <= a < end]
        return max(ends, default=None)

    def start_piece(self, clean: str, top: list[_Piece], previous_end: int, first: int, header: str | tuple,
                    role_end: int | None = None) -> _Piece | None:
        """The output piece a turn starts at: the first after its role header (of the headers of the modes read, the
        one that ends last: in DeepSeek-V4's thinking mode a turn whose reasoning is dropped prints the default mode's
        ``<｜Assistant｜></think>``; and at least after the message's role, ``role_end``), else the expression that
        prints its content."""
        region = clean[previous_end:first]
        h = None
        for one in [x for x in ((header,) if isinstance(header, str) else header) if x]:
            for length in range(len(one), min(len(one), 4) - 1, -1):
                prefix = without_partial_marker(one[:length]) if length < len(one) else one
                at = region.rfind(prefix) if len(prefix) >= min(len(one), 4) else -1
                if at >= 0:
                    end = previous_end + at + len(prefix)
                    self.header_sites.update(p.output for p in top if p.start < end and p.end > end - len(prefix)
                                             and clean[max(p.start, end - len(prefix)):min(p.end, end)].strip())
                    h = end if h is None else max(h, end)
                    break
        if role_end is not None:
            h = role_end if h is None else max(h, role_end)
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
        common = min(common_prefix(cut, clean), len(cut.rstrip()))
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
            raise GenerationTagsRefused("an assistant turn starts and ends in different parts of the template", STRUCTURE)
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
            raise GenerationTagsRefused("an assistant turn ends before it starts in the template's statement order", STRUCTURE)
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
            if not printed & foreign and not (self.fine and _assigns(stmt, None if self.fine is True else self.fine)):
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
                    raise GenerationTagsRefused(f"an assistant turn's first expression prints another message too (line {stmt.span.line})", STRUCTURE)
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
            if not any(_prints(stmt) for stmt in r.body[r.first:r.last + 1]):
                continue  # a block around {% set %}s or blanks marks nothing (an empty block to a reviewer)
            outputs = [self.structure.output_index[id(n)] for stmt in r.body[r.first:r.last + 1] for n in walk(stmt)
                       if isinstance(n, A.Output)]
            if outputs and not self.inside.intersection(outputs):
                continue  # a branch no render printed the model's text by (a tool result's other shapes, beside the
                # one a turn printed its results by): whose text it prints is not known, so it is not marked
            if r.operand and _blank_split(r):
                r.operand = 0  # a split would leave only blanks out, and write '' + before the rest: none
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
                raise GenerationTagsRefused(f"an assistant turn leaves its loop with {{% break %}} or {{% continue %}} (line {node.span.line})", LOOP_CONTROL)
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
            self.escaping.add(read.name)
            later = next((i for i in range(r.last + 1, len(r.body))
                          if r.body[i].span.start <= read.span.start < r.body[i].span.end), None)
            if later is None:
                stmt = assigned[read.name]
                raise _Overlap(
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
                raise GenerationTagsRefused(f"cannot split the expression at line {first.span.line}", UNSPLITTABLE)
            if op == "+" and not any(_is_string(o) for o in _operands(first.expr)[1][:r.operand]):
                raise GenerationTagsRefused(
                    f"the role header at line {first.span.line} is not provably a string: splitting it off could change the output",
                    UNSPLITTABLE)
            at = gap_start + gap.index(op)
            left, right = self.source[inner_start:at], self.source[at + 1:inner_end]
            if not (_parses(left) and _parses(right)):
                raise GenerationTagsRefused(f"cannot split the expression at line {first.span.line}", UNSPLITTABLE)
            head = self.source[first.tag.span.start:inner_start] + left.rstrip() + " }}"
            led = op == "+" and _string_led(first.expr, r.operand, lambda name: _string_name(s, name, first))
            rest = "{{ " + ("'' + " if op == "+" and not led else "") + right.lstrip() + self.source[inner_end:first.tag.span.end]
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
        # the loop over messages: the innermost one whose variable the template reads a role of (``message['role']``),
        # not a loop over a turn's calls or over indexes
        loops = [loop for loop in s.enclosing(r.key, (A.For,)) if isinstance(loop.target, A.Name)]
        loops = [loop for loop in loops if loop.target.name in self.role_readers()] or loops
        if not loops:
            raise GenerationTagsRefused("the statements that print an assistant turn print other roles too, outside a loop over messages", STRUCTURE)
        variable = loops[0].target.name
        inner_left = close_right[0]
        return start, end, (head + "{%" + open_left + f" if {variable}['role'] == 'assistant' %}}{{% generation {open_right}%}}"
                            + body + "{%" + inner_left + " endgeneration %}{%" + inner_left + " else " + open_right + "%}" + body
                            + "{%" + inner_left + " endif " + close_right[1] + "%}")

    def recarved(self, instrumented: str, conversations: list, header: str) -> str | None:
        """The copy whose runs leave out the ``{{ }}`` that printed only outside the assistant turns (and put the runs
        that still print there under a role test), when it verifies; else None."""
        self.only_elsewhere = {k for k, _ in self.elsewhere} - self.inside
        try:
            if not self.only_elsewhere:
                return None
            ranges = _merged(self.located(instrumented, conversations, header), self.header_outputs())
            for r in ranges:
                r.conditional = r.conditional or self.prints_elsewhere(r)
            copy = self.rewrite(ranges)
        except GenerationTagsBudgetExceeded:
            raise
        except GenerationTagsRefused:
            return None
        finally:
            self.only_elsewhere = set()
        return copy if self.verify(copy, conversations) is None else None

    def prints_elsewhere(self, r: _Range) -> bool:
        """Whether a statement of ``r`` printed outside every assistant turn in a located render (the operands of its
        first expression from the split on)."""
        s = self.structure
        for stmt in r.body[r.first:r.last + 1]:
            for node in walk(stmt):
                if isinstance(node, A.Output):
                    k = s.output_index[id(node)]
                    low = r.operand if node is r.body[r.first] else 0
                    if any((k, j) in self.elsewhere for j in range(low, len(self.splits.get(k, (None, [0]))[1]) or 1)):
                        return True
        return False

    def header_outputs(self) -> frozenset:
        """The ids of the ``{{ }}`` that print part of an assistant turn's role header."""
        return frozenset(id(self.structure.outputs[k]) for k in self.header_sites)

    def role_readers(self) -> set[str]:
        """The names the template reads a ``role`` of (``message['role']``, ``message.role``)."""
        found = set()
        for node in walk(self.structure.tree):
            if isinstance(node, A.Getattr) and node.attr == "role" and isinstance(node.node, A.Name):
                found.add(node.node.name)
            elif isinstance(node, A.Getitem) and isinstance(node.arg, A.Const) and node.arg.value == "role" \
                    and isinstance(node.node, A.Name):
                found.add(node.node.name)
        return found

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
            raise GenerationTagsRefused(f"cannot split the string at line {first.span.line} after its role header", UNSPLITTABLE)
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
        """What went wrong with the tagged copy, or None: in the default mode and in each mode variant, on the
        conversations the turns were located with, the space's members of that mode and seeded random conversations."""
        try:
            parse(copy, max_source_chars=None, max_source_tokens=None)
        except Exception as exc:  # noqa: BLE001
            return f"the copy does not parse ({exc})"
        for variables in [(), *self.variants]:
            problem = self.verify_mode(copy, conversations, variables)
            if problem is not None:
                return Problem(getattr(problem, "kind", ""), problem + f" (mode {variant_name(variables)})") if variables \
                    else problem
        return None

    def verify_mode(self, copy: str, conversations: list, variables: tuple) -> str | None:
        checks: list[tuple[list, dict, bool]] = [(c, {}, True) for c in conversations + self.client_conversations]
        checks += [(m.messages, m.options, False) for m in self.space if m.variables == variables]
        seed = random.Random(len(self.source) + 7919 * len(checks))
        for _ in range(_RANDOM_CONVERSATIONS if not variables else _RANDOM_PER_MODE):
            random_messages = random_conversation(seed, self.needles)
            checks.append((_chunked(random_messages) if self.chunked else random_messages, {}, True))
        self.mode = variables
        try:
            header = self.header(self.user)
            for messages, options, needled in checks:
                problem = self.check(copy, messages, options, needled, header)
                if problem is not None:
                    return problem
        finally:
            self.mode = ()
        return None

    def check(self, copy: str, messages: list, options: dict, needled: bool, header: str) -> str | None:
        """The copy against the original on one conversation, in the mode read."""
        traced, error = self.render(self.source, messages, traced=True, **options)
        if error is not None:  # a traced render's error names its own string type: the plain render's is the original's
            expected, error = self.render(self.source, messages, **options)
            provenance = None
        else:
            expected, provenance = traced
        if options.get("continue_final_message"):  # no spans with it (transformers refuses the two together)
            got, copy_error = self.render(copy, messages, **options)
            if got != expected or not same_failure(error, copy_error):
                return f"the copy renders other text than the original (continue_final_message): {copy_error or 'text'}"
            return None
        got, copy_error = self.render(copy, messages, spans=True, **options)
        if error is not None or copy_error is not None:
            if not same_failure(error, copy_error):
                return f"the original gives {error or 'text'} and the copy {copy_error or 'text'}"
            return None
        text, spans = got
        if text != expected and provenance is not None:  # the plain render is the template's text
            expected, provenance = self.render(self.source, messages, plain=True, **options)[0], None
        if text != expected:
            at = common_prefix(text, expected)
            return (f"the copy renders different text from offset {at}: {expected[max(0, at - 20):at + 20]!r} in the "
                    f"original, {text[max(0, at - 20):at + 20]!r} in the copy")
        problem = misplaced_origins(text, spans, messages, provenance) if provenance is not None else None
        if problem is None and needled:
            problem = misplaced_needles(text, spans, messages, header)
        return problem or header_in_span(text, spans, header)


def _assistant_branch(structure: _Structure, key: tuple) -> bool:
    """Whether the body ``key`` is the branch of an ``if``/``elif`` whose test names the assistant role and no other
    (``role == 'assistant' or role == 'system'`` is a branch of two roles)."""
    owner = structure.nodes.get(key[0])
    if not isinstance(owner, (A.If, A.Elif)) or key[1] != "body":
        return False
    named = {n.value for n in walk(owner.test) if isinstance(n, A.Const) and isinstance(n.value, str)}
    return "assistant" in named and not named & _OTHER_ROLES


def _assigns(stmt: A.Node, names: frozenset | None = None) -> bool:
    """Whether ``stmt`` sets a plain name (one of ``names``, when given) outside loops and macros (which keep their sets)."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (A.Set, A.SetBlock)) and any(isinstance(t, A.Name) and (names is None or t.name in names)
                                                        for t in walk(node.target)):
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
            for x in message_needles(m) if x in clean[p.start:p.end]}


def _merged(ranges: list[_Range], headers: frozenset = frozenset()) -> list[_Range]:
    """One range per run of overlapping ranges in a body; a range inside another's statements is covered there, its role
    header (printed by a ``{{ }}`` of ``headers``, the ids of those that print part of one) left out (:func:`_around`)."""
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
                    # one turn starts after a role header inside the statement, another goes through it (gpt-oss's
                    # "<|start|>assistant to=" opens a call turn, or follows the turn's analysis message): a split start
                    # keeps the header out of every span; of two splits the first (a turn whose content is empty
                    # starts at the operand after it)
                    splits = [x for x in ((current.operand, current.cut), (r.operand, r.cut)) if x != (0, 0)]
                    current.operand, current.cut = min(splits) if splits else (0, 0)
                elif r.operand > 0 or r.cut > 0:
                    # a turn starts after a role header inside body[r.first], which another turn's run goes through:
                    # the statements before it are a block of their own (if they print), the header stays out
                    if any(_prints(stmt) for stmt in current.body[current.first:r.first]):
                        merged.append(_Range(current.body, current.key, current.first, r.first - 1, current.operand,
                                             current.conditional, current.cut))
                    r.last, r.conditional = max(current.last, r.last), current.conditional or r.conditional
                    current = r
                    continue
                current.last = max(current.last, r.last)
                current.conditional = current.conditional or r.conditional
            else:
                merged.append(current)
                current = r
        merged.append(current)
    spans = [_extent(r) for r in merged]
    kept = []
    for r, (a, b) in zip(merged, spans):
        if any((c < a and b <= d) or (c <= a and b < d) for c, d in spans):
            continue  # inside another range's statements: covered there (with its start, see _around)
        # a range inside this one's statements whose turn starts after statements of its body that print (its role
        # header) or inside its first statement: covering it whole would cover that header
        nested = [y for y, (c, d) in zip(merged, spans) if y is not r and ((a < c and d <= b) or (a <= c and d < b))
                  and ((y.operand and not _blank_split(y)) or y.cut or any(isinstance(n, A.Output) and id(n) in headers
                                                 for stmt in y.body[:y.first] for n in walk(stmt)))]
        kept.extend(_around(r, nested) if nested else [r])
    kept.sort(key=lambda r: r.body[r.first].span.start)
    for x, y in zip(kept, kept[1:]):
        if x.body[x.last].span.end > y.body[y.first].span.start:
            raise _Overlap("the statements of two assistant turns overlap")
    return kept


def _blank_split(r: _Range) -> bool:
    """Whether ``r``'s split leaves only blank string constants out (``{{ '\\n' + content }}``: no role header)."""
    stmt = r.body[r.first]
    if not isinstance(stmt, A.Output) or r.cut:
        return False
    before = _operands(stmt.expr)[1][:r.operand]
    return all(_is_string(o) and not o.value.strip() for o in before)


def _string_led(expr: A.Expr, operand: int, string_name: Any = None) -> bool:
    """Whether the ``+`` chain from ``operand`` on stays a concatenation without ``'' +`` before it: its first operand is
    a string, or its second is (``content + eot``). A string content then gives the same text; any other value still
    raises ``TypeError``, in the message of the other operand order (``same_failure``). A lone value or two values in a
    row could print or add where the template raised, and keep the ``'' +``. ``string_name(name)`` says whether a
    name the template sets is a string where it is printed (:func:`_string_name`)."""
    rest = _operands(expr)[1][operand:]
    return _stringy(rest[0], string_name) or (len(rest) > 1 and _stringy(rest[1], string_name))


# jinja2's filters whose result is a string whatever they are given (``soft_str``/``str`` of the value first)
_TEXT_FILTERS = frozenset({"string", "trim", "upper", "lower", "title", "capitalize", "striptags", "replace", "tojson",
                           "join", "format"})
# str's methods that return a str (no other value a conversation holds has them: a call of one raises either way)
_TEXT_METHODS = frozenset({"strip", "lstrip", "rstrip", "upper", "lower", "title", "capitalize", "replace", "format",
                           "join", "removeprefix", "removesuffix"})


def _stringy(expr: A.Expr | None, string_name: Any = None) -> bool:
    """Whether ``expr`` is a string or raises: a string constant, a special token (a string from the tokenizer, or
    undefined, which raises either way), a filter that makes a string of its value, a call of a str method that returns
    one (``content.strip()``), a ``~``, a ``+`` with such an operand, both branches of a conditional, or a name
    ``string_name`` proves a string."""
    if expr is None:
        return False
    if isinstance(expr, A.Name):
        return expr.name in SPECIAL_TOKENS or (string_name is not None and string_name(expr.name))
    if isinstance(expr, A.CondExpr):
        return _stringy(expr.expr1, string_name) and _stringy(expr.expr2, string_name)
    if isinstance(expr, A.BinOp) and expr.op == "+":
        return _stringy(expr.left, string_name) or _stringy(expr.right, string_name)
    return (_is_string(expr) or isinstance(expr, A.Concat)
            or (isinstance(expr, A.Filter) and expr.name in _TEXT_FILTERS)
            or (isinstance(expr, A.Call) and isinstance(expr.node, A.Getattr) and expr.node.attr in _TEXT_METHODS))


def _string_name(structure: "_Structure", name: str, output: A.Output) -> bool:
    """Whether the name ``name``, printed by ``output``, is a string there: the template binds it only by ``{% set name =
    value %}`` of string values (Qwen3.5's ``content``, always ``...|trim`` or a str method's result; never a loop
    variable, a parameter, a block set or an import), and sets it before ``output`` in the body holding ``output`` or in
    a body around it (unset, it would print nothing where the template raised). Macros and call blocks have names of
    their own (``render_content(content)``): what they bind is not the template's, and a name printed inside one is
    not proved."""
    scoped = {id(n) for m in structure.nodes.values() if isinstance(m, (A.Macro, A.CallBlock)) for n in walk(m)}
    if id(output) in scoped:
        return False
    for node in structure.nodes.values():
        if id(node) in scoped:
            continue
        if isinstance(node, A.Set) and name in _bound(node.target):
            if not isinstance(node.target, A.Name) or not _stringy(node.value):
                return False
        elif isinstance(node, (A.For, A.SetBlock)) and name in _bound(node.target):
            return False
        elif isinstance(node, A.With) and any(name in _bound(t) for t in node.targets):
            return False
        elif (isinstance(node, A.Macro) and node.name == name) or (isinstance(node, A.Import) and node.target == name):
            return False
        elif isinstance(node, A.FromImport) and any((i.alias or i.name) == name for i in node.names):
            return False
    return any(isinstance(stmt, A.Set) and isinstance(stmt.target, A.Name) and stmt.target.name == name
               for _key, body, index in structure.path(output) for stmt in body[:index])


def _bound(target: A.Expr) -> set[str]:
    return {n.name for n in walk(target) if isinstance(n, A.Name)}


def same_failure(original: str | None, copy: str | None) -> bool:
    """Whether a tagged copy fails as its template does: the same error text, or both a ``TypeError`` of ``+`` (a split
    ``{{ header }}{% generation %}{{ content + eot }}`` raises ``unsupported operand type(s) for +: 'NoneType' and
    'str'`` where ``{{ header + content + eot }}`` raises ``can only concatenate str (not "NoneType") to str``)."""
    return original == copy or (original is not None and copy is not None
                                and _concatenation_error(original) and _concatenation_error(copy))


def _concatenation_error(error: str) -> bool:
    return error.startswith(("TypeError: can only concatenate ", "TypeError: unsupported operand type(s) for +: "))


def _extent(r: _Range) -> tuple[int, int]:
    return r.body[r.first].span.start, r.body[r.last].span.end


def _bodies(stmt: A.Node) -> list[tuple[tuple, tuple]]:
    """The statement bodies directly inside ``stmt``, each with its key (owner id, field)."""
    found = []
    for name, value in iter_fields(stmt):
        if name in ("body", "else_body") and isinstance(value, tuple) and value:
            found.append(((id(stmt), name), value))
        elif name == "elifs":
            found.extend(((id(e), "body"), e.body) for e in value if e.body)
    return found


def _around(outer: _Range, nested: list[_Range]) -> list[_Range]:
    """``outer``'s statements as ranges that leave out what comes before each ``nested`` range's start in its body.

    A turn that starts deeper than another turn's run (a call turn at ``<|start|>assistant to=`` inside the branch that
    another turn reaches after its reasoning) would otherwise be covered whole, its role header with it. A statement
    that holds a nested range is not wrapped whole: each of its bodies is, except the one on the way to the nested
    range, where the statements before the range's start (or before the statement on the way) stay outside and the
    rest is covered the same way; a body the range starts in starts with the range's split (``operand``, ``cut``)."""
    def inside(y: _Range, start: int, end: int) -> bool:
        a, b = _extent(y)
        return start <= a and b <= end

    def cover(body: tuple, key: tuple, first: int, last: int, operand: int, cut: int, inner: list[_Range]) -> list[_Range]:
        out: list[_Range] = []
        run = first
        for k in range(first, last + 1):
            here = [y for y in inner if inside(y, body[k].span.start, body[k].span.end) and not (y.key == key and y.first == k)]
            if not here or (k == first and (operand or cut)):
                continue
            if run < k and any(_prints(stmt) for stmt in body[run:k]):
                out.append(_Range(body, key, run, k - 1, *((operand, outer.conditional, cut) if run == first
                                                            else (0, outer.conditional))))
            for child_key, child in _bodies(body[k]):
                deeper = [y for y in here if y.key == child_key or inside(y, child[0].span.start, child[-1].span.end)]
                if not deeper:
                    if any(_prints(stmt) for stmt in child):
                        out.append(_Range(child, child_key, 0, len(child) - 1, 0, outer.conditional))
                    continue
                # from the first range starting in this body, or the first statement holding one, whichever is first
                starts = [(y.first, -y.operand, -y.cut, id(y)) for y in deeper if y.key == child_key]
                starts += [(j, 1, 0, 0) for j, stmt in enumerate(child)
                           if any(y.key != child_key and inside(y, stmt.span.start, stmt.span.end) for y in deeper)]
                at, operand_y, cut_y, which = min(starts)
                y_first = [y for y in deeper if id(y) == which]
                out.extend(cover(child, child_key, at, len(child) - 1, -operand_y if y_first else 0, -cut_y if y_first else 0,
                                 [z for z in deeper if z not in y_first]))
            run = k + 1
        if run <= last and any(_prints(stmt) for stmt in body[run:last + 1]):
            out.append(_Range(body, key, run, last, *((operand, outer.conditional, cut) if run == first
                                                      else (0, outer.conditional))))
        return out

    return cover(outer.body, outer.key, outer.first, outer.last, outer.operand, outer.cut, nested)


def _prints(stmt: A.Node) -> bool:
    """Whether ``stmt`` may print: it holds a ``{{ }}`` or non-blank template text (or is one)."""
    return any(isinstance(n, A.Output) or (isinstance(n, A.Data) and n.text.strip()) for n in walk(stmt))


def _chunked(messages: list) -> list:
    """The conversation with each non-empty string content as one text chunk."""
    return [{**m, "content": [{"type": "text", "text": m["content"]}]} if isinstance(m.get("content"), str) and m["content"]
            else m for m in messages]


def _needled(messages: list, needles: Needles) -> list:
    """``messages`` with a needle for each non-empty text (content, text parts, reasoning), each call's name (its tool
    result's ``name`` the same needle) and nothing else changed."""
    names: dict[str, str] = {}
    found = []
    for message in messages:
        message = dict(message)
        for key in ("content", "reasoning_content", "reasoning"):
            value = message.get(key)
            if isinstance(value, str) and value:
                message[key] = needles.new()
            elif isinstance(value, list):
                message[key] = [{**part, "text": needles.new()} if isinstance(part, dict) and part.get("type") == "text"
                                else part for part in value]
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call["function"]
                calls.append({**call, "function": {**function, "name": names.setdefault(function["name"], needles.new())}})
            message["tool_calls"] = calls
        if message.get("role") == "tool" and isinstance(message.get("name"), str):
            message["name"] = names.get(message["name"], message["name"])
        found.append(message)
    return found


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
            raise _Overlap("two rewrites of the template overlap")
        out.append(source[at:start])
        out.append(text)
        at = end
    out.append(source[at:])
    return "".join(out)
