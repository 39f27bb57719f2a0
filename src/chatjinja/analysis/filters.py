"""jinja2's filters and tests and transformers' template globals, as the symbolic executor models them on abstract values."""

from __future__ import annotations

from typing import Any, Callable

from .values import (
    MAX_TEXT,
    UNKNOWN,
    Builtin,
    Cat,
    Failure,
    Generator,
    Method,
    Namespace,
    Sym,
    SymLen,
    Undefined,
    Unknown,
    compare,
    concat,
    contains,
    get_attribute,
    get_item,
    is_text,
    iterate,
    labels_in,
    length,
    built_items,
    safe_printf,
    spend,
    string_method,
    to_json,
    to_number,
    to_text,
    truth,
)

__all__ = ["FILTERS", "TESTS", "GLOBALS", "apply_filter", "apply_test", "KNOWN_GLOBALS"]


def _soft_text(value: Any) -> Any:
    return "" if isinstance(value, Undefined) else to_text(value)


def _attribute_path(item: Any, attribute: Any) -> Any:
    if isinstance(attribute, int):
        return get_item(item, attribute)
    value = item
    for part in str(attribute).split("."):
        if isinstance(value, Undefined):
            return value
        key: Any = int(part) if part.isdigit() else part
        value = get_item(value, key)
    return value


def _select(value: Any, args: tuple, kwargs: dict, by_attribute: bool, keep: bool, span: Any) -> Any:
    if truth(value) is False:
        return Generator()  # jinja2 checks ``if value:`` before iterating
    items = iterate(value, span)
    if by_attribute:
        if not args:
            raise Failure("type", "selectattr needs an attribute", span)
        attribute, rest = args[0], args[1:]
    else:
        attribute, rest = None, args
    spend(len(items))  # a test or lookup per item
    result = Generator()
    for item in items:
        subject = _attribute_path(item, attribute) if by_attribute else item
        if rest:
            outcome = apply_test(str(rest[0]), subject, rest[1:], {}, span)
        else:
            outcome = truth(subject)
        if outcome is None or isinstance(outcome, Unknown):
            outcome = True  # keep what might pass: the analyser looks for what can reach output
        if bool(outcome) == keep:
            result.append(item)
    return result


def _map(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    if truth(value) is False:
        return Generator()
    items = iterate(value, span)
    spend(len(items))  # a filter or lookup per item
    if "attribute" in kwargs:
        default = kwargs.get("default")
        out = Generator()
        for item in items:
            got = _attribute_path(item, kwargs["attribute"])
            out.append(default if isinstance(got, Undefined) and "default" in kwargs else got)
        return out
    if args:
        name, rest = str(args[0]), args[1:]
        return Generator(apply_filter(name, item, rest, {}, span) for item in items)
    return Generator(items)


def _join(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    separator = args[0] if args else kwargs.get("d", "")
    attribute = args[1] if len(args) > 1 else kwargs.get("attribute")
    items = iterate(value, span)
    if attribute is not None:
        items = [_attribute_path(item, attribute) for item in items]
    parts: list = []
    for i, item in enumerate(items):
        if i:
            parts.append(separator)
        parts.append(_soft_text(item))
    if any(isinstance(p, Unknown) for p in parts):
        return Unknown(labels_in(parts))
    return concat(parts)


def _sort_key(item: Any, attribute: Any, case_sensitive: bool) -> Any:
    key = _attribute_path(item, attribute) if attribute is not None else item
    if isinstance(key, str) and not case_sensitive:
        key = key.lower()
    return key


def _sort(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    reverse = bool(args[0]) if args else bool(kwargs.get("reverse", False))
    case_sensitive = bool(args[1]) if len(args) > 1 else bool(kwargs.get("case_sensitive", False))
    attribute = args[2] if len(args) > 2 else kwargs.get("attribute")
    items = list(iterate(value, span))
    spend(len(items))  # the keys and the sort (``iterate`` charged the copy)
    keys = [_sort_key(item, attribute, case_sensitive) for item in items]
    if any(isinstance(k, (Sym, Cat, Unknown, SymLen, Undefined)) for k in keys):
        return items  # order unknown; what reaches output does not depend on it
    try:
        order = sorted(range(len(items)), key=lambda i: keys[i], reverse=reverse)
    except TypeError as exc:
        raise Failure("type", str(exc), span) from None
    return [items[i] for i in order]


def _dictsort(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    if not isinstance(value, dict):
        if isinstance(value, Undefined):
            raise value.fail(span)
        raise Failure("type", f"'{type(value).__name__}' object has no attribute 'items'", span)
    items = list(value.items())
    if any(isinstance(k, (Sym, Cat)) for k, _ in items):
        return items
    try:
        return sorted(items, key=lambda kv: kv[0].lower() if isinstance(kv[0], str) else kv[0])
    except TypeError:
        return items


def _default(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    default = args[0] if args else kwargs.get("default_value", "")
    boolean = bool(args[1]) if len(args) > 1 else bool(kwargs.get("boolean", False))
    if isinstance(value, Undefined):
        return default
    if boolean:
        t = truth(value)
        if t is False:
            return default
        if t is None:
            return UNKNOWN
    return value


def _first(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    if isinstance(value, (Sym, Cat)):
        return Unknown(labels_in(value))
    items = iterate(value, span)
    return items[0] if items else Undefined("first")


def _last(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    if isinstance(value, (Sym, Cat)):
        return Unknown(labels_in(value))
    if isinstance(value, Undefined):
        return Undefined("last")
    if isinstance(value, Generator):
        raise Failure("type", "'generator' object is not reversible", span)
    items = iterate(value, span)
    return items[-1] if items else Undefined("last")


def _text_filter(name: str) -> Callable:
    def apply(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
        text = _soft_text(value)
        if isinstance(text, Unknown):
            return text
        return string_method(text, name, args, kwargs)

    return apply


def _trim(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    text = _soft_text(value)
    if isinstance(text, Unknown):
        return text
    return string_method(text, "strip", args[:1] or ((kwargs["chars"],) if "chars" in kwargs else ()), {})


def _replace(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    text = _soft_text(value)
    if isinstance(text, str) and all(isinstance(a, str) for a in args[:2]) and len(args) >= 2:
        return string_method(text, "replace", args[:3], {})  # (its size checks)
    if isinstance(text, Cat) and len(args) >= 2 and all(isinstance(a, str) for a in args[:2]):
        return concat([p.replace(args[0], args[1]) if isinstance(p, str) else p for p in text.parts])
    return text


def _unique(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    seen: list = []
    for item in iterate(value, span):
        if not any(item == s for s in seen):
            seen.append(item)
    return seen


def _items(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    if isinstance(value, Undefined):
        return []
    if isinstance(value, dict):
        return list(value.items())
    raise Failure("type", f"Can only get item pairs from a mapping, not {type(value).__name__}", span)


def _number(kind: type) -> Callable:
    def apply(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
        default = args[0] if args else kwargs.get("default", 0 if kind is int else 0.0)
        if isinstance(value, Undefined):
            return default
        return to_number(value, kind, default)

    return apply


def _aggregate(name: str) -> Callable:
    def apply(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
        items = iterate(value, span)
        if kwargs.get("attribute") is not None:
            items = [_attribute_path(i, kwargs["attribute"]) for i in items]
        if any(isinstance(i, (Sym, Cat, Unknown, SymLen)) for i in items):
            return UNKNOWN
        try:
            if name == "sum":
                start = args[0] if args else kwargs.get("start", 0)
                if isinstance(start, list):
                    total = sum(len(i) for i in items if isinstance(i, (list, tuple)))
                    if total * max(len(items), 1) > 50 * MAX_TEXT:
                        raise Failure("limit", "sum of lists too costly", span)
                return sum(items, start)
            if not items:
                return Undefined(name)
            return min(items) if name == "min" else max(items)
        except TypeError as exc:
            raise Failure("type", str(exc), span) from None

    return apply


def _reverse(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    if isinstance(value, str):
        return value[::-1]
    if isinstance(value, (Sym, Cat)):
        return Unknown(labels_in(value))
    return list(reversed(iterate(value, span)))


def _same(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    return value


def _safe(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    """``Markup(value)``: a string, so ``dict|safe`` is its repr."""
    return value if isinstance(value, (str, Sym, Cat)) else _soft_text(value)


_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("'", "&#39;"), ('"', "&#34;"))


def _escape_literal(text: str) -> str:
    for char, entity in _ESCAPES:
        text = text.replace(char, entity)
    return text


def _escape(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    """markupsafe's ``escape``: on literal text exactly; input text is assumed to hold no ``&<>'"``."""
    text = _soft_text(value)
    if isinstance(text, str):
        return _escape_literal(text)
    if isinstance(text, Cat):
        return concat([_escape_literal(p) if isinstance(p, str) else p for p in text.parts])
    return text


def _opaque_text(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    if isinstance(value, str) and not args:
        return value
    return Unknown(labels_in(value))


def _indent(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    text = _soft_text(value)
    if isinstance(text, str):
        width = args[0] if args else kwargs.get("width", 4)
        if isinstance(width, int) and width * (text.count("\n") + 1) > MAX_TEXT:
            raise Failure("limit", "indent too wide", span)
        prefix = " " * width if isinstance(width, int) else str(width)
        lines = text.split("\n")
        first = bool(args[1]) if len(args) > 1 else bool(kwargs.get("first", False))
        out = "\n".join((prefix + line if (i or first) and line else line) for i, line in enumerate(lines))
        return out
    return text  # input text: indentation inserts literals between lines; the text itself survives


def _batch_or_slice(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    items = iterate(value, span)
    return [items] if items else []


def _wordcount(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    text = _soft_text(value)
    return len(text.split()) if isinstance(text, str) else UNKNOWN


def _format(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    """The ``format`` filter: printf-style ``value % args`` (on plain literal data only)."""
    if isinstance(value, str):
        return safe_printf(value, kwargs or tuple(args))
    return Unknown(labels_in(value) | labels_in(list(args)) | labels_in(kwargs))


def _attr(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    return get_attribute(value, str(args[0]) if args else "", span, fallback=False)


def _tojson(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    return to_json(value, kwargs.get("indent", args[1] if len(args) > 1 else None), span)


def _length(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    return length(value, span)


def _string(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    return _soft_text(value)


def _list(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    return list(iterate(value, span))


def _groupby(value: Any, args: tuple, kwargs: dict, span: Any) -> Any:
    return Unknown(labels_in(value))


FILTERS: dict[str, Callable] = {
    "length": _length,
    "count": _length,
    "tojson": _tojson,
    "trim": _trim,
    "join": _join,
    "string": _string,
    "default": _default,
    "d": _default,
    "upper": _text_filter("upper"),
    "lower": _text_filter("lower"),
    "title": _text_filter("title"),
    "capitalize": _text_filter("capitalize"),
    "safe": _safe,
    "e": _escape,
    "escape": _escape,
    "forceescape": _escape,
    "list": _list,
    "dictsort": _dictsort,
    "items": _items,
    "selectattr": lambda v, a, k, s: _select(v, a, k, True, True, s),
    "rejectattr": lambda v, a, k, s: _select(v, a, k, True, False, s),
    "select": lambda v, a, k, s: _select(v, a, k, False, True, s),
    "reject": lambda v, a, k, s: _select(v, a, k, False, False, s),
    "map": _map,
    "first": _first,
    "last": _last,
    "replace": _replace,
    "sort": _sort,
    "unique": _unique,
    "reverse": _reverse,
    "int": _number(int),
    "float": _number(float),
    "abs": lambda v, a, k, s: abs(v) if isinstance(v, (int, float)) else UNKNOWN,
    "round": lambda v, a, k, s: round(v, a[0] if a else 0) if isinstance(v, (int, float)) else UNKNOWN,
    "sum": _aggregate("sum"),
    "min": _aggregate("min"),
    "max": _aggregate("max"),
    "indent": _indent,
    "center": _opaque_text,
    "truncate": _opaque_text,
    "wordwrap": _opaque_text,
    "striptags": _opaque_text,
    "urlencode": _opaque_text,
    "pprint": lambda v, a, k, s: to_text(v),
    "filesizeformat": _opaque_text,
    "xmlattr": _opaque_text,
    "wordcount": _wordcount,
    "format": _format,
    "attr": _attr,
    "batch": _batch_or_slice,
    "slice": _batch_or_slice,
    "groupby": _groupby,
    "random": lambda v, a, k, s: Unknown(labels_in(v)),
}


def apply_filter(name: str, value: Any, args: tuple, kwargs: dict, span: Any = None) -> Any:
    fn = FILTERS.get(name)
    if fn is None:
        raise Failure("type", f"No filter named {name!r}.", span)
    return fn(value, tuple(args), dict(kwargs), span)


def _test_sequence(value: Any) -> bool:
    if isinstance(value, Generator):
        return False
    return isinstance(value, (list, tuple, dict, str, Sym, Cat, Undefined))


def _test_iterable(value: Any) -> bool:
    return isinstance(value, (list, tuple, dict, str, Sym, Cat, Undefined))


def _test_compare(op: str) -> Callable:
    def apply(value: Any, *args: Any) -> Any:
        return compare(op, value, args[0] if args else None)

    return apply


def _divisible(value: Any, *args: Any) -> Any:
    if isinstance(value, int) and args and isinstance(args[0], int) and args[0]:
        return value % args[0] == 0
    return UNKNOWN


def _parity(even: bool) -> Callable:
    def apply(value: Any, *args: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return (value % 2 == 0) == even
        if isinstance(value, Undefined):
            raise value.fail()
        return UNKNOWN

    return apply


def _case_test(upper: bool) -> Callable:
    def apply(value: Any, *args: Any) -> Any:
        if isinstance(value, str):
            return value.isupper() if upper else value.islower()
        return UNKNOWN

    return apply


TESTS: dict[str, Callable] = {
    "defined": lambda v, *a: not isinstance(v, Undefined),
    "undefined": lambda v, *a: isinstance(v, Undefined),
    "none": lambda v, *a: v is None,
    "string": lambda v, *a: is_text(v),
    "mapping": lambda v, *a: isinstance(v, dict),
    "iterable": lambda v, *a: _test_iterable(v),
    "sequence": lambda v, *a: _test_sequence(v),
    "number": lambda v, *a: isinstance(v, (int, float, SymLen)),
    "integer": lambda v, *a: (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, SymLen),
    "float": lambda v, *a: isinstance(v, float),
    "boolean": lambda v, *a: isinstance(v, bool),
    "true": lambda v, *a: v is True,
    "false": lambda v, *a: v is False,
    "callable": lambda v, *a: isinstance(v, (Builtin, Method)) or callable(v),
    "sameas": lambda v, *a: (v is a[0]) if a else False,
    "eq": _test_compare("eq"),
    "equalto": _test_compare("eq"),
    "==": _test_compare("eq"),
    "ne": _test_compare("ne"),
    "!=": _test_compare("ne"),
    "lt": _test_compare("lt"),
    "<": _test_compare("lt"),
    "lessthan": _test_compare("lt"),
    "le": _test_compare("lteq"),
    "<=": _test_compare("lteq"),
    "gt": _test_compare("gt"),
    ">": _test_compare("gt"),
    "greaterthan": _test_compare("gt"),
    "ge": _test_compare("gteq"),
    ">=": _test_compare("gteq"),
    "in": lambda v, *a: contains(a[0], v) if a else False,
    "odd": _parity(False),
    "even": _parity(True),
    "divisibleby": _divisible,
    "lower": _case_test(False),
    "upper": _case_test(True),
    "escaped": lambda v, *a: False,
    "filter": lambda v, *a: v in FILTERS,
    "test": lambda v, *a: v in TESTS,
}


def apply_test(name: str, value: Any, args: tuple, kwargs: dict, span: Any = None) -> Any:
    fn = TESTS.get(name)
    if fn is None:
        raise Failure("type", f"No test named {name!r}.", span)
    return fn(value, *args)


def _raise_exception(*args: Any, **kwargs: Any) -> Any:
    message = args[0] if args else ""
    raise Failure("raise", message if isinstance(message, str) else "raise_exception")


def _namespace(*args: Any, **kwargs: Any) -> Any:
    attrs: dict = {}
    for arg in args:
        if isinstance(arg, dict):
            attrs.update(arg)
    attrs.update(kwargs)
    return Namespace(attrs)


def _dict(*args: Any, **kwargs: Any) -> Any:
    out: dict = {}
    for arg in args:
        if isinstance(arg, dict):
            out.update(arg)
        elif isinstance(arg, list):
            for pair in arg:
                if isinstance(pair, (list, tuple)) and len(pair) == 2:
                    out[pair[0]] = pair[1]
    out.update(kwargs)
    return out


def _range(*args: Any, **kwargs: Any) -> Any:
    if not all(isinstance(a, int) for a in args):
        return [UNKNOWN]
    r = range(*args)
    if len(r) > 100_000:  # jinja2's sandbox MAX_RANGE
        raise Failure("type", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).")
    built_items(len(r))
    return list(r)


GLOBALS: dict[str, Any] = {
    "raise_exception": Builtin(_raise_exception),
    "strftime_now": Builtin(lambda *a, **k: Sym("strftime_now")),
    "namespace": Builtin(_namespace),
    "dict": Builtin(_dict),
    "range": Builtin(_range),
    "lipsum": Builtin(lambda *a, **k: "lorem ipsum"),
    "cycler": Builtin(lambda *a, **k: UNKNOWN),
    "joiner": Builtin(lambda *a, **k: Builtin(lambda: UNKNOWN)),
}

KNOWN_GLOBALS = frozenset(GLOBALS) | {"loop", "caller", "varargs", "kwargs", "true", "false", "none", "True", "False", "None"}
