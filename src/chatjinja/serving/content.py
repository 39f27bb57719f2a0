"""What a region's text becomes: the content parsers, transforms and schema casts of the response-template format, as transformers 5.25's ``chat_parsing`` reads them, in time linear in the text.

Each parser gives what transformers' gives, or raises ``ValueError`` (and ``KeyError`` for a
transform placeholder with no value) with transformers' message. What differs is the cost on
hostile text and a bound on nesting:

- ``json``'s dialect knobs (``string_delims``, ``unquoted_keys``) are applied in one pass each
  (transformers' substitutions retry from every quote of an unterminated string, and replace each
  extracted string in a pass of its own: both quadratic);
- JSON nested deeper than :data:`MAX_NESTING` lists and objects is refused with ``ValueError``
  before ``json.loads`` sees it (which raises ``RecursionError`` around 1,000 levels);
- ``xml-inline`` searches its tag pattern only up to the last place its closing literal occurs
  (an unclosed tag is otherwise searched to the end of the text once per opening).

With ``tolerant=True`` the parsers also say what they left unread: a JSON value followed by text,
a call list followed by text, an id the transform names and the model did not write, ``parameters``
where the transform reads ``arguments``.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
from collections.abc import Callable
from typing import Any, NoReturn

from .patterns import regex, required_suffix

__all__ = ["MAX_NESTING", "cast_tool_calls", "read_field", "tool_parameters"]

MAX_NESTING = 100
"""The most lists and objects a JSON value or a Python call list may nest (transformers' call-list limit)."""

_ALIASES = {"arguments": "parameters", "parameters": "arguments"}
_STREAMABLE = frozenset({"text", "int", "float", "bool"})
_TYPED = frozenset({"json", "python-call-list"})


# ----------------------------------------------------------------------------------------------------
# Scalars


def _text(text: str, args: dict) -> str:
    return text.strip() if args.get("strip", True) else text


def _int(text: str, args: dict) -> int:
    return int(_text(text, args))


def _float(text: str, args: dict) -> float:
    return float(_text(text, args))


def _bool(text: str, args: dict) -> bool:
    return _text(text, args).lower() in ("true", "1")


# ----------------------------------------------------------------------------------------------------
# JSON

_LAX_OPEN, _LAX_CLOSE = "\x01", "\x02"
# transformers' pattern is compiled without DOTALL: a backslash before a newline ends a string's reading
_JSON_STRING = regex.compile(r'"(?:\\.|[^"\\])*+"') if regex else None
_JSON_STRING_BODY = regex.compile(r'(?:\\.|[^"\\])*+') if regex else None
_BARE_KEY = regex.compile(r"(?<=[{,])(\s*)(\w+)(\s*):") if regex else None
_KEY_OR_STRING = regex.compile(r'"(?:\\.|[^"\\])*"|(?<=[{,])(\s*)(\w+)(\s*):') if regex else None
_SENTINEL = regex.compile("\x01(\\d+)\x02") if regex else None
_STRUCTURE = regex.compile(r'[\[\]{}]|"(?:\\.|[^"\\])*+"?', regex.DOTALL) if regex else None


def _extract_delimited(working: str, open_d: str, close_d: str, captured: list[str]) -> str:
    """``re.sub(escape(open) + "(.*?)" + escape(close), ...)`` in one pass: each string becomes ``\\x01i\\x02``."""
    if not open_d or not close_d:  # an empty delimiter: the substitution itself (no run of attempts to repeat)
        def _capture(m: Any) -> str:
            captured.append(m.group(1))
            return f"{_LAX_OPEN}{len(captured) - 1}{_LAX_CLOSE}"

        return regex.sub(regex.escape(open_d) + r"(.*?)" + regex.escape(close_d), _capture, working, flags=regex.DOTALL)
    out: list[str] = []
    pos = 0
    while True:
        start = working.find(open_d, pos)
        if start < 0:
            break
        end = working.find(close_d, start + len(open_d))
        if end < 0:  # no later opening can close either
            break
        captured.append(working[start + len(open_d):end])
        out += [working[pos:start], f"{_LAX_OPEN}{len(captured) - 1}{_LAX_CLOSE}"]
        pos = end + len(close_d)
    out.append(working[pos:])
    return "".join(out)


def _quote_keys(working: str) -> str:
    """Quote bare keys as transformers does (strings kept whole), in one pass.

    Its pattern tries a whole string at each quote. An attempt that fails stops where the string's
    reading stops (the end of the text, or a backslash before a newline); every quote before that
    point is escaped in that reading, so its attempt stops there and fails too: that stretch is
    read for bare keys only, and no quote in it is tried again."""
    parts: list[str] = []
    start = pos = 0
    while (quote := working.find('"', pos)) >= 0:
        m = _JSON_STRING.match(working, quote)
        if m is not None:
            pos = m.end()
            continue
        stop = _JSON_STRING_BODY.match(working, quote + 1).end()
        parts += [_KEY_OR_STRING.sub(_quoted, working[start:quote]), _BARE_KEY.sub(_quoted, working[quote:stop])]
        start = pos = stop
    parts.append(_KEY_OR_STRING.sub(_quoted, working[start:]))
    return "".join(parts)


def _quoted(m: Any) -> str:
    return m.group(0) if m.group(2) is None else f'{m.group(1)}"{m.group(2)}"{m.group(3)}:'


def nesting(text: str) -> int:
    """The deepest nesting of ``[``/``{`` outside strings (an upper bound where brackets do not pair)."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return 0
    depth = deepest = 0
    for m in _STRUCTURE.finditer(text):
        char = m.group()[0]
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _loads(working: str, text: str) -> Any:
    if nesting(working) > MAX_NESTING:
        raise ValueError(f"json: lists and objects nested more than {MAX_NESTING} levels deep.\nContent: {text[:200]!r}")
    try:
        return json.loads(working)
    except RecursionError:  # a deep stack at the caller: the bound above is not reached
        raise ValueError(f"json: lists and objects nested too deep to read.\nContent: {text[:200]!r}") from None


def _json(text: str, args: dict, tolerant: bool) -> tuple[Any, str]:
    string_delims = args.get("string_delims", [])
    unquoted_keys = args.get("unquoted_keys", False)
    if string_delims and (_LAX_OPEN in text or _LAX_CLOSE in text):
        raise ValueError("json: input contains reserved sentinel characters (\\x01/\\x02); cannot parse safely.")
    working = text
    captured: list[str] = []
    for open_d, close_d in string_delims:
        working = _extract_delimited(working, open_d, close_d, captured)
    if unquoted_keys:
        working = _quote_keys(working)
    if captured:
        working = _SENTINEL.sub(lambda m: json.dumps(captured[int(m.group(1))]) if int(m.group(1)) < len(captured)
                                else m.group(0), working)
    try:
        return _loads(working, text), ""
    except json.JSONDecodeError as e:
        if args.get("allow_non_json"):
            return _text(text, args), ""
        if tolerant and working == text and e.msg == "Extra data":  # a value, then text: the text is left over
            stripped = len(text) - len(text.lstrip())
            value, end = json.JSONDecoder().raw_decode(text, stripped)
            return value, text[end:]
        if working == text:
            raise ValueError(f"json parser could not parse region as JSON.\nContent: {text!r}\nError: {e}") from e
        raise ValueError(
            f"json: could not parse after dialect transforms.\n"
            f"Original: {text!r}\nTransformed: {working!r}\nError: {e}"
        ) from e


# ----------------------------------------------------------------------------------------------------
# Tagged values and lines


def _sub_parse(raw: str, value_parser: dict | None) -> Any:
    if value_parser is None:
        return raw
    return parse_content(raw, value_parser.get("name", "text"), value_parser.get("args", {}))[0]


def _xml_inline(text: str, args: dict) -> dict:
    tag_pattern = args.get("tag_pattern")
    if tag_pattern is None:
        raise ValueError("xml-inline: 'tag_pattern' content_arg is required")
    value_parser = args.get("value_parser")
    merge = args.get("merge_duplicates", False)
    by_group, parsers_by_capture = None, {}
    if (value_parser_by := args.get("value_parser_by")) is not None:
        by_group, parsers_by_capture = value_parser_by.get("group"), value_parser_by.get("parsers")
        if not isinstance(by_group, str) or not isinstance(parsers_by_capture, dict):
            raise ValueError(
                "xml-inline: 'value_parser_by' must be a dict with 'group' (a named group in tag_pattern) "
                f"and 'parsers' (a dict mapping what that group captures to a value parser). Got: {value_parser_by!r}"
            )
    suffix = required_suffix(tag_pattern)
    if suffix is not None:  # every tag ends with this literal: nothing after its last occurrence can match
        last = text.rfind(suffix)
        text = text[:last + len(suffix)] if last >= 0 else ""
    out: dict[str, Any] = {}
    merged: set[str] = set()
    for m in _tag_pattern(tag_pattern).finditer(text):
        groups = m.groupdict()
        key = groups.get("key")
        if key is None:
            raise ValueError(f"xml-inline: tag_pattern must have a named group 'key'. Pattern: {tag_pattern}")
        parser = value_parser
        if by_group is not None:
            if by_group not in groups:
                raise ValueError(
                    f"xml-inline: value_parser_by names group '{by_group}', which tag_pattern does not define. "
                    f"Pattern: {tag_pattern}"
                )
            parser = parsers_by_capture.get(groups[by_group], value_parser)
        value = _sub_parse(groups.get("value", ""), parser)
        if key in out and merge:
            if key not in merged:
                out[key] = [out[key]]
                merged.add(key)
            out[key].append(value)
        else:
            out[key] = value
    return out


@functools.lru_cache(maxsize=256)
def _tag_pattern(source: Any) -> Any:
    try:
        return regex.compile(source, regex.DOTALL)
    except (regex.error, TypeError) as e:  # transformers lets the regex module's own error out
        raise ValueError(f"xml-inline: invalid tag_pattern {source!r}: {e}") from None


def _kv_lines(text: str, args: dict) -> dict:
    line_sep = args.get("line_sep", "\n")
    kv_sep = args.get("kv_sep", ":")
    value_parser = args.get("value_parser")
    out: dict[str, Any] = {}
    for line in text.split(line_sep):
        line = _text(line, args)
        if not line or kv_sep not in line:
            continue
        k, v = line.split(kv_sep, 1)
        k, v = _text(k, args), _text(v, args)
        out[k] = _sub_parse(v, value_parser)
    return out


# ----------------------------------------------------------------------------------------------------
# Python call lists (transformers' grammar, iterative: no recursion)

_CALL_LIST_WHITESPACE = regex.compile(r"[ \t\n\r]*") if regex else None
_CALL_LIST_NAME = regex.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[-.][A-Za-z0-9_]+)*") if regex else None
_CALL_LIST_NUMBER = regex.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?") if regex else None
_CALL_LIST_STRING = regex.compile(r"""'((?:[^'\\\n\r]|\\.)*)'|"((?:[^"\\\n\r]|\\.)*)\"""", flags=regex.DOTALL) if regex else None
_CALL_LIST_UNICODE_ESCAPE = regex.compile(r"u([0-9a-fA-F]{4})") if regex else None
_CALL_LIST_SURROGATE = regex.compile(r"[\ud800-\udfff]") if regex else None
_CALL_LIST_LOW_SURROGATE = regex.compile(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})") if regex else None
_CALL_LIST_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_CALL_LIST_CONSTANTS = {"True": True, "true": True, "False": False, "false": False, "None": None, "null": None}
_CALL_LIST_MAX_INTEGER = 2**53 - 1


def _python_call_list(text: str, args: dict, tolerant: bool) -> tuple[list[dict], str]:
    """``[get_weather(city="Paris")]`` into ``[{"name": ..., "arguments": {...}}]``: transformers' grammar
    and messages, read with an explicit stack (lists and dicts nest at most :data:`MAX_NESTING` deep)."""
    position = 0

    def fail(message: str) -> NoReturn:
        raise ValueError(f"python-call-list: {message} at position {position}.\nContent: {text!r}")

    def at(char: str) -> bool:
        nonlocal position
        position = _CALL_LIST_WHITESPACE.match(text, position).end()
        return text.startswith(char, position)

    def expect(char: str) -> None:
        nonlocal position
        if not at(char):
            fail(f"expected {char!r}")
        position += 1

    def string() -> str:
        nonlocal position
        match = _CALL_LIST_STRING.match(text, position)
        if match is None:
            fail("invalid string")
        body = match[1] if match[1] is not None else match[2]
        if _CALL_LIST_SURROGATE.search(body) is not None:
            fail("lone surrogate in the string starting")
        out, start = [], 0
        while (backslash := body.find("\\", start)) != -1:
            out.append(body[start:backslash])
            start = backslash + 2
            if body[backslash + 1] in _CALL_LIST_ESCAPES:
                out.append(_CALL_LIST_ESCAPES[body[backslash + 1]])
                continue
            escape = _CALL_LIST_UNICODE_ESCAPE.match(body, backslash + 1)
            if escape is None:
                fail(f"unsupported escape {body[backslash : backslash + 2]!r} in the string starting")
            code, start = int(escape[1], 16), escape.end()
            if 0xD800 <= code <= 0xDBFF and (low := _CALL_LIST_LOW_SURROGATE.match(body, start)) is not None:
                code, start = 0x10000 + ((code - 0xD800) << 10) + (int(low[1], 16) - 0xDC00), low.end()
            if 0xD800 <= code <= 0xDFFF:
                fail("lone surrogate escape in the string starting")
            out.append(chr(code))
        position = match.end()
        return "".join(out) + body[start:]

    def scalar() -> Any:
        nonlocal position
        if (match := _CALL_LIST_NUMBER.match(text, position)) is not None:
            is_integer = match[1] is None and match[2] is None
            if is_integer and (len(match[0]) > 17 or abs(int(match[0])) > _CALL_LIST_MAX_INTEGER):
                fail("integer outside the range of -(2^53 - 1) to 2^53 - 1")
            if not is_integer and math.isinf(float(match[0])):
                fail("number too large")
            position = match.end()
            return int(match[0]) if is_integer else float(match[0])
        if (match := _CALL_LIST_NAME.match(text, position)) is not None and match[0] in _CALL_LIST_CONSTANTS:
            position = match.end()
            return _CALL_LIST_CONSTANTS[match[0]]
        fail("expected a string, number, list, dict, True, False or None")

    def unique(pairs: list[tuple[str, Any]]) -> dict:
        out = {}
        for key, item in pairs:
            if key in out:
                fail(f"repeated name {key!r}")
            out[key] = item
        return out

    def key() -> str:
        if not (at("'") or at('"')):
            fail("dict keys must be strings")
        found = string()
        expect(":")
        return found

    def value() -> Any:
        """One value; the lists and dicts it opens are kept on a stack, not in Python frames."""
        nonlocal position
        stack: list[list[Any]] = []  # each: [items (pairs for a dict), its closing character, is a dict, pending key]
        while True:
            if at("'") or at('"'):
                item: Any = string()
            elif at("[") or at("{"):
                if len(stack) >= MAX_NESTING:
                    fail(f"lists and dicts nested more than {MAX_NESTING} levels deep")
                is_dict = text[position] == "{"
                position += 1
                close = "}" if is_dict else "]"
                if at(close):
                    position += 1
                    item = {} if is_dict else []
                else:
                    frame: list[Any] = [[], close, is_dict, None]
                    stack.append(frame)
                    if is_dict:
                        frame[3] = key()
                    continue
            else:
                item = scalar()
            while True:  # place the value; close each container that ends after it
                if not stack:
                    return item
                frame = stack[-1]
                frame[0].append((frame[3], item) if frame[2] else item)
                if at(frame[1]):
                    position += 1
                    stack.pop()
                    item = unique(frame[0]) if frame[2] else frame[0]
                    continue
                expect(",")
                if frame[2]:
                    frame[3] = key()
                break

    def name(what: str) -> str:
        nonlocal position
        position = _CALL_LIST_WHITESPACE.match(text, position).end()
        match = _CALL_LIST_NAME.match(text, position)
        if match is None:
            fail(f"expected {what}")
        position = match.end()
        return match[0]

    def call() -> dict:
        nonlocal position
        function_name = name("a function name")
        expect("(")
        pairs: list[tuple[str, Any]] = []
        if at(")"):
            position += 1
            return {"name": function_name, "arguments": {}}
        while True:
            keyword = name("a keyword argument (positional arguments and trailing commas are not supported)")
            if not at("="):
                fail("expected '=' (positional arguments are not supported)")
            position += 1
            pairs.append((keyword, value()))
            if at(")"):
                position += 1
                return {"name": function_name, "arguments": unique(pairs)}
            expect(",")

    expect("[")
    calls: list[dict] = []
    if at("]"):
        position += 1
    else:
        while True:
            calls.append(call())
            if at("]"):
                position += 1
                break
            expect(",")
    position = _CALL_LIST_WHITESPACE.match(text, position).end()
    if position != len(text):
        if tolerant:
            return calls, text[position:]
        fail("unexpected content after the closing ']'")
    return calls, ""


# ----------------------------------------------------------------------------------------------------
# Dispatch, transforms


_PARSERS: dict[str, Callable[[str, dict], Any]] = {
    "text": _text, "int": _int, "float": _float, "bool": _bool, "xml-inline": _xml_inline, "kv-lines": _kv_lines,
}
CONTENT_PARSERS = frozenset([*_PARSERS, "json", "python-call-list"])


def parse_content(text: str, name: str, args: dict, tolerant: bool = False) -> tuple[Any, str]:
    """(the value, the text left unread after it: only ever non-empty when ``tolerant``)."""
    if name == "json":
        return _json(text, args, tolerant)
    if name == "python-call-list":
        return _python_call_list(text, args, tolerant)
    return _PARSERS[name](text, args), ""


_PLACEHOLDER = regex.compile(r"\{(\w+(?:\.\w+)*)\}") if regex else None


class _Missing(Exception):
    """A placeholder with no value (tolerant reading leaves an ``id`` out)."""


def _lookup(path: str, scope: dict, tolerant: bool) -> Any:
    root, *keys = path.split(".")
    if root not in scope:
        raise KeyError(f"transform placeholder '{{{path}}}' is not defined. Available: {sorted(scope)}")
    value = scope[root]
    for key in keys:
        if not isinstance(value, dict):
            raise ValueError(f"transform placeholder '{{{path}}}' cannot index into {type(value).__name__} at '{key}'")
        if key not in value:
            if tolerant and _ALIASES.get(key) in value:
                key = _ALIASES[key]
            else:
                raise ValueError(f"transform placeholder '{{{path}}}' is missing key '{key}'. Available: {sorted(value)}")
        value = value[key]
    return value


def _apply_transform(transform: Any, scope: dict, tolerant: bool) -> Any:
    if isinstance(transform, dict):
        out = {}
        for k, v in transform.items():
            try:
                out[k] = _apply_transform(v, scope, tolerant)
            except (KeyError, ValueError):
                if tolerant and k == "id" and isinstance(v, str):  # ids are optional: the model may not write one
                    continue
                raise
        return out
    if isinstance(transform, list):
        return [_apply_transform(v, scope, tolerant) for v in transform]
    if not isinstance(transform, str):
        return transform
    whole = _PLACEHOLDER.fullmatch(transform)
    if not whole:
        return transform
    return _lookup(whole.group(1), scope, tolerant)


def read_field(body: str, field: Any, captures: dict, tolerant: bool) -> tuple[Any, str]:
    """A region's value (its content parser, then its transform), and the text left unread after it."""
    value, rest = parse_content(body, field.content, field.content_args, tolerant)
    if field.transform is None:
        return value, rest
    if field.transform_each:
        if not isinstance(value, list):
            raise ValueError(
                f"Field '{field.name}': transform_each requires the parsed content to be a list, "
                f"got {type(value).__name__}."
            )
        out = []
        for item in value:
            if not isinstance(item, dict):
                raise ValueError(
                    f"Field '{field.name}': transform_each requires each list element to be a dict, "
                    f"got {type(item).__name__}."
                )
            out.append(_apply_transform(field.transform, {**captures, **item}, tolerant))
        return out, rest
    return _apply_transform(field.transform, {**captures, "content": value}, tolerant), rest


# ----------------------------------------------------------------------------------------------------
# Casting arguments to their tools' schemas (transformers 5.25)


def tool_parameters(tools: list | None, schema_of: Callable[[Any], dict]) -> dict[str, dict]:
    """Tool name -> its schema's ``properties``; callables are described by ``schema_of``."""
    params: dict[str, dict] = {}
    for tool in tools or []:
        if inspect.isfunction(tool) or inspect.ismethod(tool):
            tool = schema_of(tool)
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            parameters = fn.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, dict) else None
            params[fn["name"]] = properties if isinstance(properties, dict) else {}
    return params


def _schema_types(schema: Any) -> tuple[str, ...]:
    """The types a schema allows, in transformers' order (with a stack: a schema is data too)."""
    types: list[str] = []
    stack: list[tuple[bool, Any]] = [(False, schema)]
    while stack:
        after_children, current = stack.pop()
        if not isinstance(current, dict):
            continue
        if after_children:
            if current.get("nullable") and "null" not in types:  # `nullable` is how get_json_schema marks Optionals
                types.append("null")
            continue
        declared = current.get("type")
        if isinstance(declared, str):
            types.append(declared)
        if isinstance(declared, list):
            types.extend(t for t in declared if isinstance(t, str))
        children = [choice for union in ("anyOf", "oneOf") for choice in (current.get(union) or [])]
        stack.append((True, current))
        stack.extend((False, choice) for choice in reversed(children))
    return tuple(types)


def _coerce(raw: str, types: tuple[str, ...]) -> Any:
    for type_name in types:
        try:
            if type_name == "integer":
                try:
                    return int(raw)
                except ValueError:
                    number = float(raw)
                    if not number.is_integer():
                        continue
                    return int(number)
            if type_name == "number":
                number = float(raw)
                if number != number or number in (float("inf"), float("-inf")):
                    continue
                return int(number) if number.is_integer() and "." not in raw else number
            if type_name == "boolean" and raw.strip().lower() in ("true", "1", "false", "0"):
                return raw.strip().lower() in ("true", "1")
            if type_name == "null" and raw.strip() in ("null", "None"):
                return None
            if type_name in ("object", "array"):
                decoded = _loads(raw, raw)
                if isinstance(decoded, dict if type_name == "object" else list):
                    return decoded
        except (ValueError, OverflowError):
            continue
    return raw


def cast_tool_calls(value: Any, params: dict[str, dict], *, typed: bool) -> Any:
    """Tool-call arguments cast to their schema types, in place (``typed``: a parser that already tells strings from other values)."""
    if isinstance(value, list):
        return [cast_tool_calls(item, params, typed=typed) for item in value]
    fn = value.get("function") if isinstance(value, dict) else None
    if not isinstance(fn, dict):
        return value
    name, arguments = fn.get("name"), fn.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return value
    if properties := params.get(name):
        for key, argument in arguments.items():
            if key not in properties or not (types := _schema_types(properties[key])):
                continue
            if typed and "string" in types:
                continue
            if isinstance(argument, str):
                arguments[key] = _coerce(argument, types)
            elif isinstance(argument, list) and "array" not in types:
                arguments[key] = [_coerce(item, types) if isinstance(item, str) else item for item in argument]
    return value


def streamable(content: str) -> bool:
    return content in _STREAMABLE


def typed(content: str) -> bool:
    return content in _TYPED
