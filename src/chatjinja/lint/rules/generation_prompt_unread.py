"""GP001 generation-prompt-unread: a per-turn assistant header but ``add_generation_prompt`` never read."""

from __future__ import annotations

import re
from typing import Iterable, Iterator

from ...syntax import ast as A
from ...syntax.visitor import child_nodes, walk
from ..context import LintContext, const_str, last_key
from ..rule import Finding, Rule
from .unknown_role import role_literals

DOC = """\
## What it does
Finds templates that never read `add_generation_prompt` although, inside the message loop, they
write a per-turn header that names the role: the role itself (`'<|im_start|>' + message.role`)
or a literal assistant header (`<|im_start|>assistant`, `<|start_header_id|>assistant`,
`<start_of_turn>model`, `<|assistant|>` ...).

A template that writes the assistant header unconditionally — after the message loop, or at the
end of every user turn (Phi-3's `<|end|>\n<|assistant|>\n`) — always opens the reply and is left
alone.

## Why is this bad?
`apply_chat_template(..., add_generation_prompt=True)` is how every inference server asks for
the assistant header that starts the model's reply. A template that ignores it makes the model
continue the user's turn instead of answering.

## Example
```jinja
{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' }}{%- endfor %}
```

## Use instead
```jinja
{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
```

## Fix safety
No fix: the header to add is model-specific.
"""

# "assistant" as a header ("<|assistant|>", "<|im_start|>assistant", "Assistant:", "[ASSISTANT]", "### Assistant\n"),
# not as a word in a message ("assistant message contents"); and the openers that put a role after them.
_HEADER = re.compile(
    r"(?:<\|?|\[|#+ ?|\b)assistant(?:\|?>|\]|:|\n|<)|<start_of_turn>model|<\|im_start\|>|<\|start_header_id\|>|<\|model\|>",
    re.I,
)


# the assistant's own header, which a template may write unconditionally (then it always opens the reply)
_ASSISTANT = re.compile(r"(?:<\|?|\[|#+ ?|\b)assistant(?:\|?>|\]|:|\n|<|$)|<start_of_turn>model|<\|model\|>|CHATBOT", re.I)


def _opens_reply_always(ctx: LintContext, texts) -> bool:
    """An assistant header written outside the message loop, or in the branch for user messages."""
    if not any(_ASSISTANT.search(t) for t in texts):
        return False
    if not ctx.inside(A.For):
        return True
    arm = ctx.enclosing(A.If)
    elif_ = ctx.enclosing(A.Elif)
    test = None
    if elif_ is not None and (arm is None or elif_.span.start > arm.span.start):
        test = elif_.test
    elif arm is not None:
        test = arm.test
    if test is None:
        return False
    return any(lit.value == "user" and op == "==" for n in walk(test) if isinstance(n, A.Compare)
               for lit, _k, op, _c in role_literals(ctx, n))


def _writes_header(ctx: LintContext, expr) -> bool:
    """A header literal written as it is (not passed as a call argument), or the role itself."""
    stack = [expr]
    while stack:
        node = stack.pop()
        value = const_str(node)
        if value is not None and _HEADER.search(value):
            return True
        if isinstance(node, A.Call):
            if isinstance(node.node, A.Name) and node.node.name == "raise_exception":
                return False
            stack.append(node.node)  # arguments are not written as they are
            continue
        if isinstance(node, (A.Compare, A.Test)):
            continue
        if ctx.role_expr(node) is not None and not isinstance(node, A.Name):
            return True
        stack.extend(child_nodes(node))
    return False


def _assistant_literals(ctx: LintContext, state: dict) -> bool:
    """Whether any string literal of the template holds an assistant header (once per template: else no output's can)."""
    found = state.get("literals")
    if found is None:
        found = state["literals"] = any(_ASSISTANT.search(n.value) for n in ctx.nodes(A.Const) if const_str(n))
    return found


def _may_write_header(ctx: LintContext, state: dict) -> bool:
    """Whether some literal holds a role header or some node reads a ``role`` key (once per template: else no output
    can pass ``_writes_header``, whose role expressions always end in such a read)."""
    found = state.get("headers")
    if found is None:
        found = state["headers"] = (
            any(_HEADER.search(n.value) for n in ctx.nodes(A.Const) if const_str(n))
            or any(last_key(n) == "role" for kind in (A.Getattr, A.Getitem) for n in ctx.nodes(kind)))
    return found


def check(node, ctx: LintContext) -> Iterable[Finding]:
    state = ctx.scratch.get("GP001")
    if state is None:
        state = ctx.scratch["GP001"] = {}
    if isinstance(node, A.Name):
        if node.name == "add_generation_prompt":
            state["read"] = True
    elif isinstance(node, A.Output):
        if (not state.get("always") and _assistant_literals(ctx, state)
                and _opens_reply_always(ctx, [n.value for n in walk(node.expr) if const_str(n)])):
            state["always"] = True
        if "output" not in state and ctx.inside(A.For) and _may_write_header(ctx, state) and _writes_header(ctx, node.expr):
            state["output"] = node.span
    else:
        start, end = ctx.kept.get(node.span.start, (0, 0))
        if end > start and not state.get("always") and _opens_reply_always(ctx, [ctx.text[start:end]]):
            state["always"] = True
        if "data" not in state and end > start and _HEADER.search(ctx.text, start, end):
            state["data"] = (start, end)
    return ()


def finish(ctx: LintContext) -> Iterator[Finding]:
    state = ctx.scratch.get("GP001", {})
    if state.get("read") or state.get("always"):
        return
    message = ("the template writes a per-turn role header but never reads add_generation_prompt, so it cannot "
               "open the assistant's reply")
    if "output" in state:
        yield Finding(state["output"].start, state["output"].end, message)
    elif "data" in state:
        yield Finding(*state["data"], message)


RULE = Rule("GP001", "generation-prompt-unread", "warning", "add_generation_prompt is never read", DOC,
            (A.Name, A.Output, A.Data), check, finish)
