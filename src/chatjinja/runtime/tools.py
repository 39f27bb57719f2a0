"""Python callables as tools: the JSON schema transformers 5.25.0's ``get_json_schema`` builds.

Reproduced from ``transformers/utils/chat_template_utils.py`` (type hints, Google-style docstrings,
``(choices: [...])`` enums, Enum and Literal hints) so that a callable renders the same text.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import types
from enum import Enum
from typing import Any, Callable, Literal, Union, get_args, get_origin, get_type_hints

__all__ = ["get_json_schema", "TypeHintParsingException", "DocstringParsingException"]

description_re = re.compile(r"^(.*?)[\n\s]*(Args:|Returns:|Raises:|\Z)", re.DOTALL)
args_re = re.compile(r"\n\s*Args:\n(.*?)[\n\s]*(Returns:|Raises:|\Z)", re.DOTALL)
args_split_re = re.compile(
    r"""
(?:^|\n)  # Match the start of the args block, or a newline
([ \t]*)(\w+)(?:[ \t]*\([^()\n]*\))?:\s*  # Capture the indentation and the argument name, skip a "(type)"
(.*?)\s*  # Capture the argument description, which can span multiple lines, and strip trailing spacing
(?=\n(?!\1[ \t])[ \t]*\w+(?:[ \t]*\([^()\n]*\))?:|\Z)  # Stop at the next "name:" not indented deeper, or the end
""",
    re.DOTALL | re.VERBOSE,
)
returns_re = re.compile(r"\n\s*Returns:\n\s*(.*?)[\n\s]*(Raises:|\Z)", re.DOTALL)


class TypeHintParsingException(Exception):
    """Exception raised for errors in parsing type hints to generate JSON schemas"""


class DocstringParsingException(Exception):
    """Exception raised for errors in parsing docstrings to generate JSON schemas"""


JSON_SCALAR_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean", type(None): "null"}


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _get_json_schema_type(param_type: type) -> dict[str, str] | None:
    type_mapping: dict[Any, dict[str, str]] = {
        int: {"type": "integer"},
        float: {"type": "number"},
        str: {"type": "string"},
        bool: {"type": "boolean"},
        type(None): {"type": "null"},
        list: {"type": "array"},
        tuple: {"type": "array"},
        dict: {"type": "object"},
        Any: {},
    }
    # transformers maps PIL images and torch tensors when those packages are installed
    if _available("PIL"):
        from PIL.Image import Image  # lazy: PIL is not a dependency; transformers maps its images when it is installed

        type_mapping[Image] = {"type": "image"}
    if _available("torch"):
        import torch  # lazy: torch is not a dependency; transformers maps its tensors when it is installed

        type_mapping[torch.Tensor] = {"type": "audio"}
    return type_mapping.get(param_type)


def _enum_values_to_json_schema(values: list) -> dict:
    value_types = list(dict.fromkeys(JSON_SCALAR_TYPES[type(value)] for value in values))
    return {"type": value_types[0] if len(value_types) == 1 else value_types, "enum": values}


def _parse_type_hint(hint: Any) -> dict:
    origin = get_origin(hint)
    args = get_args(hint)

    if origin is None and isinstance(hint, type) and issubclass(hint, Enum):
        values = [member.value for member in hint]
        if not values:
            raise TypeHintParsingException(f"The Enum {hint.__name__} has no members, so no value could ever match it.")
        if any(type(value) not in JSON_SCALAR_TYPES for value in values):
            raise TypeHintParsingException(
                f"The Enum {hint.__name__} has member values that cannot be written as JSON scalars.\n"
                f"Values: {values}\n"
                "Enum member values must be int, float, str, bool or None to be converted to a JSON schema."
            )
        return _enum_values_to_json_schema(values)

    elif origin is None:
        json_schema_type = _get_json_schema_type(hint)
        if json_schema_type is None:
            raise TypeHintParsingException(
                f"Couldn't convert the type hint {hint!r} to a JSON schema, likely because it is a custom class "
                "or object. Supported type hints are basic types like int, float, str and bool, Enum classes, "
                "typing.Literal, and list, tuple, dict and Union types containing those. If you need a more complex "
                "schema than that, you can write the JSON schema for your tool by hand and pass that instead "
                "of the function."
            )
        return json_schema_type

    elif origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        subtypes = [_parse_type_hint(t) for t in args if t is not type(None)]
        if len(subtypes) == 1:
            return_dict = subtypes[0]
        elif all(subtype.keys() == {"type"} and isinstance(subtype["type"], str) for subtype in subtypes):
            subtype_names = sorted({subtype["type"] for subtype in subtypes})
            return_dict = {"type": subtype_names[0] if len(subtype_names) == 1 else subtype_names}
        else:
            return_dict = {"anyOf": subtypes}
        if type(None) in args:
            return_dict["nullable"] = True
        return return_dict

    elif origin is Literal and len(args) > 0:
        if any(type(arg) not in JSON_SCALAR_TYPES for arg in args):
            raise TypeHintParsingException("Only the valid python literals can be listed in typing.Literal.")
        return _enum_values_to_json_schema(list(args))

    elif origin is list:
        if not args:
            return {"type": "array"}
        return {"type": "array", "items": _parse_type_hint(args[0])}

    elif origin is tuple:
        if not args:
            return {"type": "array"}
        if len(args) == 1:
            raise TypeHintParsingException(
                f"The type hint {str(hint).replace('typing.', '')} is a Tuple with a single element, which "
                "we do not automatically convert to JSON schema as it is rarely necessary. If this input can contain "
                "more than one element, we recommend "
                "using a list[] type instead, or if it really is a single element, remove the tuple[] wrapper and just "
                "pass the element directly."
            )
        if ... in args:
            raise TypeHintParsingException(
                "Conversion of '...' is not supported in Tuple type hints. "
                "Use list[] types for variable-length"
                " inputs instead."
            )
        return {"type": "array", "prefixItems": [_parse_type_hint(t) for t in args]}

    elif origin is dict:
        out: dict[str, Any] = {"type": "object"}
        if len(args) == 2:
            out["additionalProperties"] = _parse_type_hint(args[1])
        return out

    raise TypeHintParsingException("Couldn't parse this type hint, likely due to a custom class or object: ", hint)


def _convert_type_hints_to_json_schema(func: Callable) -> dict:
    type_hints = get_type_hints(func)
    signature = inspect.signature(func)
    func_name = getattr(func, "__name__", "operation")
    first_param_name = next(iter(signature.parameters), None)
    if (
        first_param_name in {"self", "cls"}
        and signature.parameters[first_param_name].annotation == inspect.Parameter.empty
    ):
        implicit_arg_name = first_param_name
    else:
        implicit_arg_name = None
    required = []
    for param_name, param in signature.parameters.items():
        if param_name == implicit_arg_name:
            continue
        if param.annotation == inspect.Parameter.empty:
            raise TypeHintParsingException(f"Argument {param.name} is missing a type hint in function {func_name}")
        if param.default == inspect.Parameter.empty:
            required.append(param_name)

    properties = {}
    for param_name, param_type in type_hints.items():
        if param_name == implicit_arg_name:
            continue
        if param_name == "return":
            try:
                properties[param_name] = _parse_type_hint(param_type)
            except TypeHintParsingException:
                pass
        elif param_name in signature.parameters:
            # a bound method's signature omits its receiver, whose annotation get_type_hints still returns
            properties[param_name] = _parse_type_hint(param_type)

    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def parse_google_format_docstring(docstring: str) -> tuple[str | None, dict | None, str | None]:
    """The description, argument descriptions and return description of a Google-style docstring."""
    description_match = description_re.search(docstring)
    args_match = args_re.search(docstring)
    returns_match = returns_re.search(docstring)

    description = description_match.group(1).strip() if description_match else None
    docstring_args = args_match.group(1) if args_match else None
    returns = returns_match.group(1).strip() if returns_match else None

    if docstring_args is not None:
        docstring_args = "\n".join([line for line in docstring_args.split("\n") if line.strip()])
        matches = args_split_re.findall(docstring_args)
        args_dict = {match[1]: re.sub(r"\s*\n+\s*", " ", match[2].strip()) for match in matches}
    else:
        args_dict = {}
    return description, args_dict, returns


def get_json_schema(func: Callable) -> dict:
    """The ``{"type": "function", "function": {...}}`` schema transformers builds for a callable."""
    doc = inspect.getdoc(func)
    func_name = getattr(func, "__name__", "operation")
    if not doc:
        raise DocstringParsingException(f"Cannot generate JSON schema for {func_name} because it has no docstring!")
    doc = doc.strip()
    main_doc, param_descriptions, return_doc = parse_google_format_docstring(doc)

    json_schema = _convert_type_hints_to_json_schema(func)
    if (return_dict := json_schema["properties"].pop("return", None)) is not None:
        if return_doc is not None:
            return_dict["description"] = return_doc
    for arg, schema in json_schema["properties"].items():
        if arg not in param_descriptions:
            raise DocstringParsingException(
                f"Cannot generate JSON schema for {func_name} because the docstring has no description for the argument '{arg}'"
            )
        desc = param_descriptions[arg]
        enum_choices = re.search(r"\(choices:\s*(.*?)\)\s*$", desc, flags=re.IGNORECASE)
        if enum_choices:
            schema["enum"] = [c.strip() if isinstance(c, str) else c for c in json.loads(enum_choices.group(1))]
            desc = enum_choices.string[: enum_choices.start()].strip()
        schema["description"] = desc

    output: dict[str, Any] = {"name": func_name, "description": main_doc, "parameters": json_schema}
    if return_dict is not None:
        output["return"] = return_dict
    return {"type": "function", "function": output}
