"""The analyser's one walk over the tree (``collect._Index``, a ``syntax.visitor.NodeVisitor``): node lists in the
generic walk's order, branch guards, context reads.

The reads and guards were recorded from the separate walks it replaced (the class index and
``scopes.context_reads``): jinja2's scoping for reads. The node lists are in the order of
``syntax.visitor.walk`` (pre-order, field order), the order the facts depend on (raise sites,
evidence, literal spans); delimiter tags are keyed by offset where they are read.
"""

from __future__ import annotations

import pytest

from chatjinja.analysis.collect import _INDEXED, _Index
from chatjinja.syntax import ast, parse, walk

CASES = [
    ('{% set x = y %}{{ x }}{{ z }}', [('y', 11, False), ('z', 25, False)], {'Tag': [0, 15, 22], 'Name': [7, 11, 18, 25], 'Template': [0], 'Set': [0], 'Output': [15, 22]}, []),
    ('{% set a %}{% set b = 1 %}{{ c }}{% endset %}{% set d %}x{% endset %}{{ a }}{{ b }}', [('c', 29, False)], {'Tag': [11, 26, 0, 33, 45, 57, 69, 76], 'Data': [56], 'Name': [7, 18, 29, 52, 72, 79], 'Const': [22], 'Template': [0], 'SetBlock': [0, 45], 'Set': [11], 'Output': [26, 69, 76]}, []),
    ('{% set t %}{% set f = 1 %}{% endset %}{% filter f %}{{ g }}{% endfilter %}', [('g', 55, False)], {'Tag': [11, 0, 26, 52, 38, 59], 'Name': [7, 18, 55], 'Const': [22], 'Template': [0], 'SetBlock': [0], 'Set': [11], 'FilterBlock': [38], 'Filter': [48], 'Output': [52]}, [(48, None)]),
    ("{% set out | replace(h, 'x') %}{% set h = 1 %}{% endset %}{{ out }}", [], {'Tag': [31, 0, 46, 58], 'Name': [7, 21, 38, 61], 'Const': [24, 42], 'Template': [0], 'SetBlock': [0], 'Filter': [13], 'Set': [31], 'Output': [58]}, [(13, None)]),
    ('{% if p %}{% set q = 1 %}{% else %}{% set q = 2 %}{% endif %}{{ q }}', [('p', 6, False)], {'Tag': [10, 35, 0, 25, 50, 61], 'Name': [6, 17, 42, 64], 'Const': [21, 46], 'Template': [0], 'If': [0], 'Set': [10, 35], 'Output': [61]}, []),
    ('{% if p %}{% set q = 1 %}{% elif r %}{% set q = 3 %}{% endif %}{{ q }}{% if s %}{% set u = q %}{% elif q %}{% endif %}', [('p', 6, False), ('r', 33, False), ('q', 66, False), ('s', 76, False)], {'Tag': [10, 37, 25, 0, 52, 63, 80, 95, 70, 107], 'Name': [6, 17, 33, 44, 66, 76, 87, 91, 103], 'Const': [21, 48], 'Template': [0], 'If': [0, 70], 'Set': [10, 37, 80], 'Elif': [25, 95], 'Output': [63]}, []),
    ('{% macro m(a, b=c) %}{{ a }}{{ d }}{{ e }}{{ varargs }}{% endmacro %}{% set e = 1 %}{{ m(1) }}', [('c', 16, False), ('d', 31, False)], {'Tag': [21, 28, 35, 42, 0, 55, 69, 84], 'Name': [16, 24, 31, 38, 45, 76, 87], 'Const': [80, 89], 'Template': [0], 'Macro': [0], 'Param': [11, 14], 'Output': [21, 28, 35, 42, 84], 'Set': [69], 'Call': [87]}, [(87, None)]),
    ('{% call(x, y=w) m(v) %}{{ x }}{{ y }}{{ caller }}{% endcall %}', [('m', 16, False), ('v', 18, False)], {'Tag': [23, 30, 37, 0, 49], 'Name': [16, 18, 13, 26, 33, 40], 'Template': [0], 'CallBlock': [0], 'Call': [16], 'Param': [8, 11], 'Output': [23, 30, 37]}, [(16, None)]),
    ('{% for k, v in items if v and k is defined and zz %}{{ loop.index }}{{ k }}{{ after }}{% else %}{{ k }}{% endfor %}', [('items', 15, False), ('zz', 47, False), ('after', 78, False), ('k', 99, False)], {'Tag': [52, 68, 75, 96, 0, 86, 103], 'Name': [7, 10, 15, 24, 30, 47, 55, 71, 78, 99], 'Template': [0], 'For': [0], 'Tuple': [7], 'And': [24, 24], 'Test': [30], 'Output': [52, 68, 75, 96], 'Getattr': [55]}, [(30, None), (0, None)]),
    ('{{ a is defined }}{{ b | default(c) }}{{ d | d }}{{ x is not none }}{{ f(*g, **h) | default(i, *j) }}', [('a', 3, True), ('b', 21, True), ('c', 33, False), ('d', 41, True), ('x', 52, True), ('f', 71, True), ('g', 74, True), ('h', 79, True), ('i', 92, False)], {'Tag': [0, 18, 38, 49, 68], 'Name': [3, 21, 33, 41, 52, 71, 74, 79, 92, 96], 'Template': [0], 'Output': [0, 18, 38, 49, 68], 'Test': [3, 52], 'Filter': [21, 41, 71], 'Call': [71]}, [(71, None), (3, None), (52, None), (21, None), (41, None), (71, None)]),
    ('{% with a = b, c = a %}{{ a }}{{ c }}{{ q }}{% endwith %}{{ a }}', [('b', 12, False), ('a', 19, False), ('q', 40, False)], {'Tag': [23, 30, 37, 0, 44, 57], 'Name': [8, 15, 12, 19, 26, 33, 40, 60], 'Template': [0], 'With': [0], 'Output': [23, 30, 37, 57]}, []),
    ('{% set ns = namespace(v=1) %}{% set ns.v = ns.v + 1 %}{% set other.x = 1 %}{{ ns.v }}{% set ns.y, z = 1, 2 %}', [('other', 61, False)], {'Tag': [0, 29, 54, 75, 85], 'Name': [7, 12, 43, 78, 98], 'Const': [24, 50, 71, 102, 105], 'NSRef': [36, 61, 92], 'Template': [0], 'Set': [0, 29, 54, 85], 'Call': [12], 'Keyword': [22], 'BinOp': [43], 'Getattr': [43, 78], 'Output': [75], 'Tuple': [92, 102]}, [(12, None)]),
    ("{% for m in messages %}{% if m.role == 'user' %}{{ m.content | trim }}{% endif %}{{ bos_token }}{% endfor %}", [('messages', 12, False), ('bos_token', 84, False)], {'Tag': [48, 23, 70, 81, 0, 96], 'Name': [7, 12, 29, 51, 84], 'Const': [39], 'Template': [0], 'For': [0], 'If': [23], 'Compare': [29], 'Getattr': [29, 51], 'Operand': [36], 'Output': [48, 81], 'Filter': [51]}, [(0, None), (51, "m.role == 'user'")]),
    ('{% block b %}{{ x }}{% set y = 1 %}{{ y }}{% endblock %}{{ y }}{% autoescape ae %}{{ z }}{% endautoescape %}', [('x', 16, False), ('ae', 77, False), ('z', 85, False)], {'Tag': [13, 20, 35, 0, 42, 56, 82, 63, 89], 'Name': [16, 27, 38, 59, 77, 85], 'Const': [31], 'Template': [0], 'Block': [0], 'Output': [13, 35, 56, 82], 'Set': [20], 'Autoescape': [63]}, []),
    ("{% include inc %}{% import imp as lib %}{% from fr import a as b %}{% extends ext %}{{ raise_exception('x') }}", [('inc', 11, False), ('imp', 27, False), ('fr', 48, False), ('ext', 78, False)], {'Tag': [0, 17, 40, 67, 84], 'Name': [11, 27, 48, 78, 87], 'Const': [103], 'Template': [0], 'Include': [0], 'Import': [17], 'FromImport': [40], 'ImportName': [58], 'Extends': [67], 'Output': [84], 'Call': [87]}, [(87, None)]),
    ("{{ x if y is defined else z }}{{ {'k': kv, kk: 1}[key] }}{{ [l1, l2][1:sl] }}{{ not n1 and n2 or n3 }}{{ a < b < c }}", [('x', 3, False), ('y', 8, True), ('z', 26, False), ('kv', 39, False), ('kk', 43, False), ('key', 50, False), ('l1', 61, False), ('l2', 65, False), ('sl', 71, False), ('n1', 84, False), ('n2', 91, False), ('n3', 97, False), ('a', 105, False), ('b', 109, False), ('c', 113, False)], {'Tag': [0, 30, 57, 77, 102], 'Name': [8, 3, 26, 39, 43, 50, 61, 65, 71, 84, 91, 97, 105, 109, 113], 'Const': [34, 47, 69], 'Template': [0], 'Output': [0, 30, 57, 77, 102], 'CondExpr': [3], 'Test': [8], 'Getitem': [33, 60], 'Dict': [33], 'Pair': [34, 43], 'List': [60], 'Slice': [69], 'Or': [80], 'And': [80], 'Not': [80], 'Compare': [105], 'Operand': [107, 111]}, [(8, None)]),
    ('{% if x %}{% macro mm() %}{{ inner }}{% endmacro %}{% endif %}{{ mm() }}{% set inner = 1 %}', [('x', 6, False), ('mm', 65, False)], {'Tag': [26, 10, 37, 0, 51, 62, 72], 'Name': [6, 29, 65, 79], 'Const': [87], 'Template': [0], 'If': [0], 'Macro': [10], 'Output': [26, 62], 'Call': [65], 'Set': [72]}, [(65, None)]),
    ('{% generation %}{{ gen }}{% endgeneration %}{% print pr %}{% raw %}{{ raw }}{% endraw %}', [('gen', 19, False), ('pr', 53, False)], {'Tag': [16, 0, 25, 44, 58, 76], 'Name': [19, 53], 'Template': [0], 'Generation': [0], 'Output': [16], 'Print': [44], 'Raw': [58]}, []),
]


@pytest.mark.parametrize("source,reads,order,conditions", CASES)
def test_one_walk_reads_orders_and_guards(source, reads, order, conditions):
    tree = parse(source)
    index = _Index(tree)
    assert [(u.name, u.span.start, u.guarded) for u in index.reads] == reads
    indexed = {cls.__name__ for cls in _INDEXED}
    assert {cls.__name__: [n.span.start for n in index.of(cls)] for cls in _INDEXED if index.of(cls)} == {
        name: starts for name, starts in order.items() if name in indexed}
    assert [(n.span.start, index.condition(n, source)) for n in index.of(ast.Call, ast.Test, ast.For, ast.Filter)] == conditions


@pytest.mark.parametrize("source", [case[0] for case in CASES])
def test_the_index_lists_nodes_in_the_generic_walks_order(source):
    tree = parse(source)
    index = _Index(tree)
    nodes = list(walk(tree))
    for cls in _INDEXED:
        assert [id(n) for n in index.of(cls)] == [id(n) for n in nodes if type(n) is cls], cls.__name__
