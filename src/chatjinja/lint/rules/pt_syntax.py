"""PT004–PT008, PT013, PT014: syntax other engines lack or read differently — ``%`` formatting, macro varargs, loops over strings, line endings, tags and operators."""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import Iterator

from ...syntax import ast as A
from ...syntax.visitor import child_nodes
from ..context import LintContext, const_str, last_key, path_key
from ..rule import Finding
from .portability import ENGINES, engine_list, names_by_text, pt_rule, string_tested

__all__ = ["RULES"]

PERCENT_DOC = """\
## What it does
Finds Python string formatting with `%`: `'%s: %d' % (name, n)`.

## Why is this bad?
jinja2 hands `%` to Python, which formats the string. minijinja, `@huggingface/jinja` and llama.cpp
only take `%` between numbers: the render fails ("Unknown operator \\"%\\" between String and
Tuple"). Concatenate with `~` instead.

## Example
```jinja
{{- '%s!' % eos_token }}
```

## Use instead
```jinja
{{- eos_token ~ '!' }}
```

## Fix safety
No fix.
"""


def _is_number(expr) -> bool:
    return isinstance(expr, A.Const) and isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)


def check_percent(node: A.BinOp, ctx: LintContext) -> Iterator[Finding]:
    if node.op != "%":
        return
    if const_str(node.left) is not None or isinstance(node.right, A.Tuple) or (
            isinstance(node.left, A.Filter) and node.left.name in ("string", "format")):
        yield Finding(node.span.start, node.span.end, "'%' string formatting works only in transformers; "
                      f"{engine_list(ENGINES)} fail on it", engines=ENGINES)


VARARGS_DOC = """\
## What it does
Finds `varargs` and `kwargs` read inside a macro: the extra positional and keyword arguments
jinja2 collects.

## Why is this bad?
minijinja has neither: calling the macro with more arguments than it declares fails ("too many
arguments"). llama.cpp does not define them either (`varargs|length` is 0). Declare every
parameter the macro takes, with defaults.

## Example
```jinja
{%- macro block(name) %}{{- name }}{%- for extra in varargs %}{{- ' ' ~ extra }}{%- endfor %}{%- endmacro %}{{- block('a', 'b') }}
```

## Use instead
```jinja
{%- macro block(name, extra='') %}{{- name }}{%- if extra %}{{- ' ' ~ extra }}{%- endif %}{%- endmacro %}{{- block('a', 'b') }}
```

## Fix safety
No fix.
"""


def check_varargs(node: A.Name, ctx: LintContext) -> Iterator[Finding]:
    if node.name not in ("varargs", "kwargs") or ctx.is_assigned(node.name) or not ctx.inside(A.Macro):
        return
    yield Finding(node.span.start, node.span.end, f"'{node.name}' in a macro: minijinja fails when the macro is called "
                  "with more arguments than it declares, llamacpp leaves it empty", engines=("minijinja", "llamacpp"))


LOOP_DOC = """\
## What it does
Finds `{% for %}` over a string — a literal, `x|string`, or message `content` with no `is string`
test around the loop — and `|list`, `|selectattr`, `|rejectattr` or `|map` of one.

## Why is this bad?
Python iterates a string character by character. `@huggingface/jinja` and llama.cpp refuse
("Expected iterable or object type in for loop: got String"), so a conversation whose `content` is
a plain string fails there. Test the type first and loop only over lists.

## Example
```jinja
{%- for message in messages %}{%- if message['content'] is defined %}{%- for part in message['content'] %}{{- part['text'] if part is mapping else part }}{%- endfor %}{%- endif %}{%- endfor %}
```

## Use instead
```jinja
{%- for message in messages %}{%- if message['content'] is string %}{{- message['content'] }}{%- elif message['content'] %}{%- for part in message['content'] %}{{- part['text'] }}{%- endfor %}{%- endif %}{%- endfor %}
```

## Fix safety
No fix.
"""


def _string_valued(expr, ctx: LintContext) -> str | None:
    if const_str(expr) is not None:
        return "a string literal"
    if isinstance(expr, A.Filter) and expr.name in ("string", "trim", "lower", "upper") and expr.node is not None:
        return f"'|{expr.name}' (a string)"
    if ctx.is_key_ref(expr, "content"):
        key = path_key(expr) or ctx.source_text(expr)
        if not ctx.guarded(key, ("string",)) and not string_tested(ctx):
            return f"'{ctx.source_text(expr)}', which is a string in most conversations"
    if last_key(expr) == "arguments" and not ctx.guarded(path_key(expr) or ctx.source_text(expr), ("string", "mapping")):
        return f"'{ctx.source_text(expr)}', which OpenAI-style clients send as a JSON string"
    return None


_LOOP_COUNTS = frozenset({"last", "length", "revindex", "revindex0"})


def _counts_items(loop: A.For, ctx: LintContext) -> bool:
    """Whether the loop's body reads ``loop.last``, ``loop.length`` or ``loop.revindex`` (of this loop)."""
    start, end = loop.open_tag.span.end, loop.end_tag.span.start
    for attr in ctx.nodes(A.Getattr):
        if start <= attr.span.start < end and attr.attr in _LOOP_COUNTS and isinstance(attr.node, A.Name) \
                and attr.node.name == "loop":
            inner = ctx.parent_of(attr)
            while inner is not None and inner is not loop and not isinstance(inner, A.For):
                inner = ctx.parent_of(inner)
            if inner is loop:
                return True
    return False


def check_string_loop(node, ctx: LintContext) -> Iterator[Finding]:
    if isinstance(node, A.For):
        what = _string_valued(node.iter, ctx)
        at = node.iter
    elif node.name in ("list", "selectattr", "rejectattr", "map") and node.node is not None:
        what = _string_valued(node.node, ctx)
        at = node
    else:
        return
    if what is None:
        return
    if isinstance(node, A.For) and _counts_items(node, ctx):
        yield Finding(at.span.start, at.span.end, f"iterating {what}: hfjs and llamacpp cannot loop over a string, and "
                      "minijinja's loop.last is never true over one", engines=("minijinja", "hfjs", "llamacpp"))
        return
    yield Finding(at.span.start, at.span.end, f"iterating {what}: hfjs and llamacpp cannot loop over a string",
                  engines=("hfjs", "llamacpp"))


CRLF_DOC = """\
## What it does
Finds carriage returns (`\\r`, as in Windows `\\r\\n` line endings) in the template text.

## Why is this bad?
jinja2 turns every line ending of the template into `\\n`, so transformers writes `\\n`. minijinja
and `@huggingface/jinja` keep `\\r\\n` as written: the same template gives the model other
characters (and other tokens). Save the template with `\\n` line endings; write `'\\r\\n'` in a
string literal where the prompt needs it.

## Example
```jinja
{{- eos_token }}line one\r
line two
```

## Use instead
```jinja
{{- eos_token }}line one
line two
```

## Fix safety
No fix: re-save the file with `\\n` line endings (transformers renders the same text).
"""


def finish_crlf(ctx: LintContext) -> Iterator[Finding]:
    at = ctx.text.find("\r")
    if at == -1:
        return
    count = ctx.text.count("\r")
    yield Finding(at, at + 1, f"{count} carriage return{'s' if count > 1 else ''} in the template: transformers writes "
                  "'\\n' for each line ending, minijinja and hfjs keep '\\r\\n'", engines=("minijinja", "hfjs"))


GENERATION_DOC = """\
## What it does
Finds the `{% generation %}` block transformers adds for assistant masks (`return_assistant_tokens_mask`).

## Why is this bad?
It is transformers' own extension, not Jinja: minijinja (TGI, mistral.rs) fails to parse the template
("unknown statement generation"). Ship the template used for serving without it (the training
template can keep it).

## Example
```jinja
{%- generation %}{{- eos_token }}{%- endgeneration %}
```

## Use instead
```jinja
{{- eos_token }}
```

## Fix safety
No fix.
"""


def check_generation(node: A.Generation, ctx: LintContext) -> Iterator[Finding]:
    tag = node.open_tag
    yield Finding(tag.span.start, tag.span.end, "'{% generation %}' is transformers' own tag: minijinja cannot parse it",
                  engines=("minijinja",))


RAW_DOC = """\
## What it does
Finds `{% raw %}` blocks.

## Why is this bad?
`@huggingface/jinja` and llama.cpp do not know the tag ("Unknown statement type: raw") and refuse
the whole template. minijinja drops a line break right after `{% raw %}` (as `trim_blocks` does after
other tags), where jinja2 keeps it. Write the braces in string literals instead: `{{ '{{' }}`.

## Example
```jinja
{%- raw %}{{ name }}{% endraw %}
```

## Use instead
```jinja
{{- '{{ name }}' }}
```

## Fix safety
No fix.
"""


def check_raw(node: A.Raw, ctx: LintContext) -> Iterator[Finding]:
    tag = node.open_tag
    if node.text.startswith(("\n", "\r\n")) and not tag.strip_right:
        yield Finding(tag.span.start, tag.span.end, "'{% raw %}' is unknown to hfjs and llamacpp, and minijinja drops "
                      "the line break after it, which jinja2 keeps", engines=("minijinja", "hfjs", "llamacpp"))
        return
    yield Finding(tag.span.start, tag.span.end, "'{% raw %}' is unknown to hfjs and llamacpp", engines=("hfjs", "llamacpp"))


OPERATOR_DOC = """\
## What it does
Finds operators some engine lacks: string repetition (`'-' * 3`), floor division (`a // b`) and
dict literals with keys that are not strings (`{1: 'a'}`).

## Why is this bad?
`@huggingface/jinja` has no `*` between a string and a number and only string keys in dict
literals; llama.cpp does not parse `//`. The render (or the parse) fails there. Write the string out,
use `(a / b)|int`, and quote the keys.

## Example
```jinja
{{- '=' * 10 }}{{- messages|length // 2 }}
```

## Use instead
```jinja
{{- '==========' }}{{- (messages|length / 2)|int }}
```

## Fix safety
No fix.
"""


def check_operator(node, ctx: LintContext) -> Iterator[Finding]:
    if isinstance(node, A.Dict):
        for pair in node.items:
            if isinstance(pair.key, A.Const) and not isinstance(pair.key.value, str):
                yield Finding(pair.key.span.start, pair.key.span.end, "a dict key that is not a string: hfjs refuses it",
                              engines=("hfjs",))
        return
    if node.op == "//":
        yield Finding(node.span.start, node.span.end, "'//' (floor division): llamacpp cannot parse it",
                      engines=("llamacpp",))
    elif node.op == "*" and (const_str(node.left) is not None or const_str(node.right) is not None):
        yield Finding(node.span.start, node.span.end, "repeating a string with '*': hfjs has no such operator",
                      engines=("hfjs",))


NONE_DOC = """\
## What it does
Finds `{% for %}` over `tools` or `documents`, and `tools is iterable`, with no `{% if %}` around that
checks the variable for `none` (`{% if tools %}`, `tools is not none`, `tools|default([])` ...).

## Why is this bad?
transformers passes `tools=None` and `documents=None` when the caller gives none. Python cannot
iterate `None` (`TypeError: 'NoneType' object is not iterable`) and `None is iterable` is false;
minijinja treats `none` as an empty sequence for both, so a conversation without tools renders in TGI
and mistral.rs and fails (or takes another branch) in transformers.

## Example
```jinja
{%- for tool in tools %}{{- tool['function']['name'] }}{%- endfor %}
```

## Use instead
```jinja
{%- if tools %}{%- for tool in tools %}{{- tool['function']['name'] }}{%- endfor %}{%- endif %}
```

## Fix safety
No fix.
"""

_MAYBE_NONE = ("tools", "documents")


def _none_checked(node, name: str, ctx: LintContext) -> bool:
    """Whether ``node`` sits in a macro (its caller decides) or under an ``if`` / ``x if c`` / ``c and x`` whose test
    mentions the variable (``tools``, ``ns.has_tools`` ...), other than a bare ``is defined``."""
    if ctx.inside(A.Macro):
        return True
    stem = re.compile(name[:-1] if name.endswith("s") else name, re.I)
    tests = []
    for statement in ctx.statements:
        if isinstance(statement, A.If):
            tests += [statement.test, *(arm.test for arm in statement.elifs)]
    tests += [n.test for n in ctx.innermost.get(A.CondExpr, ())] + [n.left for n in ctx.innermost.get(A.And, ())]
    for test in tests:
        if test.span.start <= node.span.start < test.span.end:
            continue  # the test itself (``tools is iterable and ...``)
        text = ctx.source_text(test)
        if not stem.search(text) or re.fullmatch(rf"\s*{name}\s+is\s+defined\s*", text):
            continue
        if _when_none(test, name) is None and _reads(test, name):
            continue  # a test a None can pass either way (``tools or documents``)
        return True
    return False


def _reads(test, name: str) -> bool:
    return any(isinstance(n, A.Name) and n.name == name for n in _walk(test))


def _walk(node):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(c for c in child_nodes(current) if isinstance(c, A.Expr))


def _when_none(test, name: str) -> bool | None:
    """The test's value when the variable ``name`` is None (None: it depends on something else)."""
    if isinstance(test, A.Name):
        return False if test.name == name else None
    if isinstance(test, A.Not):
        inner = _when_none(test.operand, name)
        return None if inner is None else not inner
    if isinstance(test, (A.And, A.Or)):
        left, right = _when_none(test.left, name), _when_none(test.right, name)
        if isinstance(test, A.And):
            return False if False in (left, right) else True if left is True and right is True else None
        return True if True in (left, right) else False if left is False and right is False else None
    if isinstance(test, A.Test) and isinstance(test.node, A.Name) and test.node.name == name:
        found = {"none": True, "defined": True, "undefined": False, "iterable": False, "sequence": False,
                 "mapping": False, "string": False}.get(test.name)
        return None if found is None else found != test.negated
    return None


def check_none_loop(node, ctx: LintContext) -> Iterator[Finding]:
    target = node.iter if isinstance(node, A.For) else node.node
    if isinstance(node, A.Test) and node.name != "iterable":
        return
    if not isinstance(target, A.Name) or target.name not in _MAYBE_NONE:
        return
    if any(isinstance(ctx.parent_of(s), A.Template) for s in ctx.set_nodes.get(target.name, ())):
        return  # set unconditionally at the top (a conditional {% set tools = [] %} can leave it None)
    if _none_checked(node, target.name, ctx):
        return
    how = "loops over" if isinstance(node, A.For) else "tests 'is iterable' on"
    yield Finding(target.span.start, target.span.end, f"the template {how} '{target.name}', which transformers passes as "
                  "None when it is not given: minijinja treats none as an empty list, Python does not",
                  engines=("minijinja",))


LOOP_SET_DOC = """\
## What it does
Finds `{% set x = ... %}` inside a `{% for %}` loop where the loop's body reads `x` before that
`set` (in the text): on every turn after the first, that read sees what the last turn set in some
engines and not in others.

## Why is this bad?
In jinja2 (and minijinja) a `set` inside a loop lasts until the end of that turn of the loop: the next
turn reads `x` from outside the loop again. `@huggingface/jinja` and llama.cpp keep the value from one
turn to the next. A template that sets a message's text in one turn and reads it in the next renders
differently (DeepSeek-R1 copies read a `content` set by the previous assistant turn). Keep state across
turns in a `namespace`, which every engine carries over.

## Example
```jinja
{%- set last = '' %}{%- for message in messages %}{%- if last %}{{- '(after ' ~ last ~ ') ' }}{%- endif %}{{- message['role'] ~ '\\n' }}{%- set last = message['role'] %}{%- endfor %}{%- if add_generation_prompt %}{{- 'assistant\\n' }}{%- endif %}
```

## Use instead
```jinja
{%- set ns = namespace(last='') %}{%- for message in messages %}{%- if ns.last %}{{- '(after ' ~ ns.last ~ ') ' }}{%- endif %}{{- message['role'] ~ '\\n' }}{%- set ns.last = message['role'] %}{%- endfor %}{%- if add_generation_prompt %}{{- 'assistant\\n' }}{%- endif %}
```

## Fix safety
No fix: a `namespace` makes jinja2 carry the value too, which changes what transformers renders.
"""


def _target_names(target) -> set[str]:
    if isinstance(target, A.Name):
        return {target.name}
    if isinstance(target, A.Tuple):
        return {n for item in target.items for n in _target_names(item)}
    return set()


def check_loop_set(node: A.Set, ctx: LintContext) -> Iterator[Finding]:
    if not isinstance(node.target, A.Name):
        return
    loop = ctx.enclosing(A.For)
    macro = ctx.enclosing(A.Macro)
    if loop is None or (macro is not None and macro.span.start > loop.span.start):
        return  # not in a loop (or in a macro inside it: its own scope)
    name = node.target.name
    if any(name in _target_names(f.target) for f in ctx.innermost.get(A.For, ())):
        return  # a loop variable: every turn binds it again, in every engine
    seen = ctx.scratch.setdefault("PT019", set())
    if (id(loop), name) in seen:
        return
    body_start = loop.open_tag.span.end
    sets = sorted(s.span.start for s in ctx.set_nodes.get(name, ())
                  if body_start <= s.span.start < loop.end_tag.span.start)
    reads = names_by_text(ctx).get(name, [])
    for read in reads[bisect_left([r.span.start for r in reads], body_start):]:
        if read.span.start >= node.span.start:
            break
        if isinstance(ctx.parent_of(read), (A.Set, A.For)) or (sets and sets[0] < read.span.start):
            continue  # an assignment or a loop target, or read after this turn set it
        seen.add((id(loop), name))
        yield Finding(read.span.start, read.span.end, f"'{name}' is read here and set later in the same loop: jinja2 "
                      "reads the value from outside the loop on every turn, hfjs and llamacpp the last turn's",
                      engines=("hfjs", "llamacpp"))
        return


RULES = {
    "PT004": pt_rule("PT004", "percent-format", "Python '%' string formatting, which other engines lack",
                     PERCENT_DOC, ENGINES, (A.BinOp,), check_percent),
    "PT005": pt_rule("PT005", "macro-varargs", "varargs/kwargs in a macro, which minijinja and llama.cpp lack",
                     VARARGS_DOC, ("minijinja", "llamacpp"), (A.Name,), check_varargs),
    "PT006": pt_rule("PT006", "string-loop", "A loop over a string, which hfjs and llama.cpp refuse",
                     LOOP_DOC, ENGINES, (A.For, A.Filter), check_string_loop),
    "PT007": pt_rule("PT007", "line-endings", "Carriage returns in the template, which minijinja and hfjs keep",
                     CRLF_DOC, ("minijinja", "hfjs"), (), None, finish_crlf),
    "PT008": pt_rule("PT008", "generation-tag", "The {% generation %} tag, which minijinja cannot parse",
                     GENERATION_DOC, ("minijinja",), (A.Generation,), check_generation),
    "PT013": pt_rule("PT013", "raw-block", "A {% raw %} block, which hfjs and llama.cpp cannot parse",
                     RAW_DOC, ENGINES, (A.Raw,), check_raw),
    "PT015": pt_rule("PT015", "none-as-empty", "A loop or 'is iterable' on tools/documents, which minijinja reads as empty when None",
                     NONE_DOC, ("minijinja",), (A.For, A.Test), check_none_loop),
    "PT019": pt_rule("PT019", "loop-scoped-set", "A variable set in a loop and read before the set, which hfjs and llama.cpp carry over",
                     LOOP_SET_DOC, ("hfjs", "llamacpp"), (A.Set,), check_loop_set),
    "PT014": pt_rule("PT014", "unsupported-operator", "String repetition, '//' or non-string dict keys, which some engines lack",
                     OPERATOR_DOC, ("hfjs", "llamacpp"), (A.BinOp, A.Dict), check_operator),
}
