"""The special-tokens map transformers 5.25.0 passes to a chat template, rebuilt from a folder's JSON files.

``PreTrainedTokenizerBase.special_tokens_map`` holds the seven named tokens (``bos_token``,
``eos_token``, ``unk_token``, ``sep_token``, ``pad_token``, ``cls_token``, ``mask_token``) plus the
model-specific ones: every other ``*_token`` key of ``tokenizer_config.json`` whose value is a string
or a serialised ``AddedToken``, and the entries of an ``extra_special_tokens`` dict. The list form
of ``extra_special_tokens`` / ``additional_special_tokens`` is *not* passed to templates.
``special_tokens_map.json`` is read only when ``tokenizer_config.json`` has no ``added_tokens_decoder``,
and its values override the config's.
"""

from __future__ import annotations

from typing import Any

from ..errors import LoadError

__all__ = ["NAMED_SPECIAL_TOKENS", "special_tokens_map"]

NAMED_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _is_added_token(value: Any) -> bool:
    return isinstance(value, dict) and value.get("__type") == "AddedToken"


def _content(value: Any, key: str, where: str) -> str:
    if "content" not in value or not isinstance(value["content"], str):
        raise LoadError(f"{where}: {key} is a token object without a string 'content'", source_name=where)
    return value["content"]


def special_tokens_map(
    config: dict[str, Any],
    config_name: str,
    tokens_map: dict[str, Any] | None = None,
    tokens_map_name: str = "special_tokens_map.json",
    tokenizer_json: dict[str, Any] | None = None,
) -> dict[str, str]:
    """``tokenizer.special_tokens_map`` as ``AutoTokenizer.from_pretrained`` would build it from these files."""
    kwargs = dict(config)
    # V5: additional_special_tokens becomes extra_special_tokens unless that is already set
    if "additional_special_tokens" in kwargs and not kwargs.get("extra_special_tokens"):
        kwargs["extra_special_tokens"] = kwargs.pop("additional_special_tokens")
    model_specific: dict[str, Any] = {}
    if isinstance(kwargs.get("extra_special_tokens"), dict):
        model_specific.update(kwargs.pop("extra_special_tokens"))

    if tokens_map is not None and "added_tokens_decoder" not in config:
        for key, value in tokens_map.items():
            if isinstance(value, dict) and key != "extra_special_tokens":
                value = {"__type": "AddedToken", "content": _content(value, key, tokens_map_name)}
            elif key == "extra_special_tokens" and isinstance(value, dict):
                model_specific.update(value)
                continue
            kwargs[key] = value

    if tokenizer_json is not None:
        padding = tokenizer_json.get("padding")
        if isinstance(padding, dict) and isinstance(padding.get("pad_token"), str):
            kwargs.setdefault("pad_token", padding["pad_token"])

    named: dict[str, str] = {}
    extra: dict[str, str] = {}
    for key, value in kwargs.items():
        if not key.endswith("_token") or value is None:
            continue
        if key in NAMED_SPECIAL_TOKENS:
            if isinstance(value, str):
                named[key] = value
            elif _is_added_token(value):
                named[key] = _content(value, key, config_name)
            else:
                # transformers: "Special token bos_token has to be either str or AddedToken but got: <class 'dict'>"
                raise LoadError(
                    f"{config_name}: {key} must be a string or an AddedToken object "
                    f'({{"__type": "AddedToken", "content": ...}}), got {type(value).__name__} {value!r}',
                    source_name=config_name,
                )
        elif isinstance(value, str):
            extra[key] = value
        elif _is_added_token(value):
            extra[key] = _content(value, key, config_name)
    for key, value in model_specific.items():
        if isinstance(value, str):
            extra[key] = value
        elif _is_added_token(value):
            extra[key] = _content(value, key, config_name)
        else:
            raise LoadError(
                f"{config_name}: extra special token {key} must be a string or an AddedToken object, got {value!r}",
                source_name=config_name,
            )
    ordered = {key: named[key] for key in NAMED_SPECIAL_TOKENS if key in named}
    ordered.update(extra)
    return ordered
