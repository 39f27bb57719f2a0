"""Model folders: which chat template(s) transformers 5.25.0 loads from a folder, and the special tokens it passes.

Two rules exist in transformers, and they disagree:

* the **tokenizer rule** (``AutoTokenizer.from_pretrained`` -> ``PreTrainedTokenizerBase._from_pretrained``):
  ``chat_template.jinja`` and ``additional_chat_templates/*.jinja`` take priority over
  ``tokenizer_config.json``'s ``chat_template`` (a string, a list of ``{"name", "template"}``, or a
  dict). When template files exist the config's template is dropped entirely, even if no
  ``chat_template.jinja`` gives a ``default``. ``chat_template.json`` is never read.
* the **processor rule** (``ProcessorMixin.from_pretrained``): ``processor_config.json``'s
  ``chat_template`` key, else the legacy ``chat_template.json`` (``{"chat_template": ...}``), which
  wins over ``chat_template.jinja`` and may not be combined with ``additional_chat_templates/``;
  else the ``.jinja`` files.

``scan_model_folder(rules="auto")`` follows the tokenizer rule and falls back to the processor
rule only when the tokenizer rule finds no template at all; the chosen rule is in ``TemplateSet.rule``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..errors import LoadError, TemplateNotFound
from ..files import FileError, input_limit, read_capped
from .paths import (
    CHAT_TEMPLATE_DIR,
    CHAT_TEMPLATE_FILE,
    PROCESSOR_CHAT_TEMPLATE_FILE,
    PROCESSOR_CONFIG_FILE,
    SPECIAL_TOKENS_MAP_FILE,
    TOKENIZER_CONFIG_FILE,
    TOKENIZER_FILE,
    is_model_folder,
)
from .record import TemplateRecord
from .selection import TemplateEntry, TemplateSet, select_template
from .special_tokens import special_tokens_map

__all__ = [
    "CHAT_TEMPLATE_FILE",
    "CHAT_TEMPLATE_DIR",
    "TOKENIZER_CONFIG_FILE",
    "PROCESSOR_CHAT_TEMPLATE_FILE",
    "is_model_folder",
    "load_config_dict",
    "load_config_file",
    "load_model_folder",
    "read_json_file",
    "scan_model_folder",
]




def read_text_file(path: Path) -> str:
    """A UTF-8 file read under the input cap (:func:`chatjinja.files.input_limit`); failures are ``LoadError``."""
    try:
        _, data = read_capped(path, input_limit())
    except FileError as exc:
        raise LoadError(str(exc), source_name=str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoadError(f"{path} is not UTF-8 text (byte {exc.start})", source_name=str(path)) from None


def read_json_file(path: Path, *, want_object: bool = True) -> Any:
    """Parse a JSON file; a syntax error names ``file:line:column``."""
    text = read_text_file(path)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"{path}:{exc.lineno}:{exc.colno}"
        raise LoadError(f"invalid JSON in {where}: {exc.msg}", source_name=where) from None
    if want_object and not isinstance(value, dict):
        raise LoadError(f"{path} must hold a JSON object, got {type(value).__name__}", source_name=str(path))
    return value


_NO_PADDING = re.compile(r'"padding"\s*:\s*null')


def _tokenizer_padding(path: Path) -> dict[str, Any] | None:
    """``tokenizer.json`` (megabytes of vocabulary) is parsed only when its ``padding`` may name a pad token."""
    text = read_text_file(path)
    if '"padding"' not in text or _NO_PADDING.search(text):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"{path}:{exc.lineno}:{exc.colno}"
        raise LoadError(f"invalid JSON in {where}: {exc.msg}", source_name=where) from None
    return value if isinstance(value, dict) else None


def _config_templates(value: Any, file: Path, key: str = "chat_template") -> tuple[dict[str, TemplateEntry], bool]:
    """The template(s) stored under ``key`` of a JSON config: (templates, named)."""
    where = f"{file}#{key}"
    if isinstance(value, str):
        return {"default": TemplateEntry("default", value, file, key)}, False
    if isinstance(value, (list, tuple)):
        templates: dict[str, TemplateEntry] = {}
        for index, item in enumerate(value):
            if not (isinstance(item, dict) and "name" in item and "template" in item):
                raise LoadError(
                    f"{where}[{index}] must be an object with 'name' and 'template', got {item!r:.80}",
                    source_name=str(file),
                )
            name, template = item["name"], item["template"]
            if not isinstance(name, str) or not isinstance(template, str):
                raise LoadError(
                    f"{where}[{index}]: 'name' and 'template' must be strings, got "
                    f"{type(name).__name__} and {type(template).__name__}",
                    source_name=str(file),
                )
            templates[name] = TemplateEntry(name, template, file, f"{key}[{name}]")  # a later duplicate wins, as in transformers
        return templates, True
    if isinstance(value, dict):
        templates = {}
        for name, template in value.items():
            if not isinstance(template, str):
                raise LoadError(f"{where}[{name}] must be a string, got {type(template).__name__}", source_name=str(file))
            templates[name] = TemplateEntry(name, template, file, f"{key}[{name}]")
        return templates, True
    raise LoadError(
        f"{where} must be a string or a list of {{\"name\", \"template\"}} objects, got {type(value).__name__}",
        source_name=str(file),
    )


def _template_files(folder: Path) -> dict[str, TemplateEntry]:
    templates: dict[str, TemplateEntry] = {}
    default = folder / CHAT_TEMPLATE_FILE
    if default.is_file():
        templates["default"] = TemplateEntry("default", read_text_file(default), default)
    extra_dir = folder / CHAT_TEMPLATE_DIR
    if extra_dir.is_dir():
        for path in sorted(extra_dir.glob("*.jinja")):
            if path.is_file():
                name = path.name.removesuffix(".jinja")
                templates[name] = TemplateEntry(name, read_text_file(path), path)
    return templates


def _flatten(templates: dict[str, TemplateEntry]) -> bool:
    """transformers keeps a single ``default`` as a plain string: is the set named?"""
    return not (len(templates) == 1 and "default" in templates)


def _tokenizer_rule(folder: Path, config: dict[str, Any] | None) -> tuple[dict[str, TemplateEntry], bool, list, list[str]]:
    files = _template_files(folder)
    config_file = folder / TOKENIZER_CONFIG_FILE
    shadowed: list[TemplateEntry] = []
    notes: list[str] = []
    config_value = (config or {}).get("chat_template")
    if files:
        if config_value is not None:
            config_templates, _ = _config_templates(config_value, config_file)
            shadowed.extend(config_templates.values())
            same = {n: e.source for n, e in config_templates.items()} == {n: e.source for n, e in files.items()}
            notes.append(
                f"{TOKENIZER_CONFIG_FILE}'s chat_template is ignored because template files exist "
                f"({'identical' if same else 'it differs'}; transformers reads the .jinja files first)"
            )
        return files, _flatten(files), shadowed, notes
    if config_value is not None:
        templates, named = _config_templates(config_value, config_file)
        return templates, named, shadowed, notes
    return {}, False, shadowed, notes


def _processor_rule(folder: Path) -> tuple[dict[str, TemplateEntry], bool, list, list[str]]:
    notes: list[str] = []
    processor_config_file = folder / PROCESSOR_CONFIG_FILE
    legacy_file = folder / PROCESSOR_CHAT_TEMPLATE_FILE
    files = _template_files(folder)
    extra = {n: e for n, e in files.items() if n != "default"}
    if legacy_file.is_file():
        legacy = read_json_file(legacy_file)
        if "chat_template" not in legacy:
            raise LoadError(f"{legacy_file} has no 'chat_template' key", source_name=str(legacy_file))
        if extra:
            raise LoadError(
                f"conflicting chat templates in {folder}: {PROCESSOR_CHAT_TEMPLATE_FILE} cannot be combined with "
                f"{CHAT_TEMPLATE_DIR}/ (transformers: 'replace the legacy chat_template.json file with a modern "
                "chat_template.jinja file')",
                source_name=str(legacy_file),
            )
        value = legacy["chat_template"]
        if not isinstance(value, str):
            raise LoadError(
                f"{legacy_file}#chat_template must be a string, got {type(value).__name__}", source_name=str(legacy_file)
            )
        templates = {"default": TemplateEntry("default", value, legacy_file, "chat_template")}
        shadowed = list(files.values())
        if shadowed:
            notes.append(f"{PROCESSOR_CHAT_TEMPLATE_FILE} wins over {CHAT_TEMPLATE_FILE} in the processor rule")
    else:
        templates, shadowed = files, []
    if processor_config_file.is_file():
        processor_config = read_json_file(processor_config_file)
        if processor_config.get("chat_template") is not None:
            shadowed = shadowed + list(templates.values())
            templates, named = _config_templates(processor_config["chat_template"], processor_config_file)
            notes.append(f"{PROCESSOR_CONFIG_FILE}'s chat_template wins over template files in the processor rule")
            return templates, named, shadowed, notes
    return templates, _flatten(templates), shadowed, notes


_RULE_NAMES = {
    "tokenizer": "tokenizer rule (AutoTokenizer.from_pretrained)",
    "processor": "processor rule (AutoProcessor.from_pretrained)",
}


def scan_model_folder(folder: str | Path, rules: str = "auto") -> TemplateSet:
    """Every chat template a model folder holds, as transformers' tokenizer (or processor) would load them.

    ``rules`` is ``"tokenizer"``, ``"processor"`` or ``"auto"`` (the tokenizer rule, else the
    processor rule when the tokenizer would find no template).
    """
    folder = Path(folder)
    if rules not in ("auto", "tokenizer", "processor"):
        raise ValueError(f"rules must be 'auto', 'tokenizer' or 'processor', got {rules!r}")
    if not folder.is_dir():
        raise TemplateNotFound(f"{folder} is not a folder", source_name=str(folder))
    config_file = folder / TOKENIZER_CONFIG_FILE
    config = read_json_file(config_file) if config_file.is_file() else None

    notes: list[str] = []
    if rules in ("auto", "tokenizer"):
        templates, named, shadowed, notes = _tokenizer_rule(folder, config)
        rule = "tokenizer"
        legacy = folder / PROCESSOR_CHAT_TEMPLATE_FILE
        if not templates and rules == "auto" and (legacy.is_file() or (folder / PROCESSOR_CONFIG_FILE).is_file()):
            templates, named, shadowed, notes = _processor_rule(folder)
            rule = "processor"
            if templates:
                notes = [f"the tokenizer rule finds no template, so this is what AutoProcessor would use", *notes]
        elif legacy.is_file():
            legacy_value = read_json_file(legacy).get("chat_template")
            if isinstance(legacy_value, str):
                shadowed = [*shadowed, TemplateEntry("default", legacy_value, legacy, "chat_template")]
                notes.append(f"{PROCESSOR_CHAT_TEMPLATE_FILE} is read by processors, not tokenizers")
    else:
        templates, named, shadowed, notes = _processor_rule(folder)
        rule = "processor"

    tokens_map_file = folder / SPECIAL_TOKENS_MAP_FILE
    tokens_map = read_json_file(tokens_map_file) if tokens_map_file.is_file() else None
    tokenizer_json = None
    if "pad_token" not in (config or {}) and "pad_token" not in (tokens_map or {}) and (folder / TOKENIZER_FILE).is_file():
        tokenizer_json = _tokenizer_padding(folder / TOKENIZER_FILE)
    special = special_tokens_map(
        config or {},
        str(config_file),
        tokens_map,
        str(tokens_map_file),
        tokenizer_json,
    )
    metadata: dict[str, Any] = {
        "add_bos_token": (config or {}).get("add_bos_token"),
        "add_eos_token": (config or {}).get("add_eos_token"),
    }
    if (folder / TOKENIZER_FILE).is_file():  # apply_chat_template(tokenize=True) tokenizes with the folder
        metadata["tokenizer"] = str(folder)
    return TemplateSet(
        location=folder,
        templates=templates,
        named=named,
        rule=_RULE_NAMES[rule],
        special_tokens=special,
        shadowed=tuple(shadowed),
        notes=tuple(notes),
        metadata=metadata,
    )


def load_model_folder(folder: str | Path, name: str | None = None, rules: str = "auto") -> TemplateRecord:
    """The chat template transformers would use for a model folder (see :func:`select_template` for ``name``)."""
    tset = scan_model_folder(folder, rules)
    if not tset.templates:
        looked = f"{CHAT_TEMPLATE_FILE}, {CHAT_TEMPLATE_DIR}/*.jinja, {TOKENIZER_CONFIG_FILE} chat_template"
        if rules != "tokenizer":
            looked += f", {PROCESSOR_CHAT_TEMPLATE_FILE}, {PROCESSOR_CONFIG_FILE} chat_template"
        raise TemplateNotFound(f"no chat template in {folder} (looked for {looked})", source_name=str(folder))
    return select_template(tset, name)


def _config_set(config: dict[str, Any], path: Path, rule: str, special: dict[str, str]) -> TemplateSet:
    """The template(s) of a parsed ``tokenizer_config.json`` / ``chat_template.json`` object (file or dict)."""
    value = config.get("chat_template")
    if value is None:
        raise TemplateNotFound(f"{path} has no chat_template", source_name=str(path))
    templates, named = _config_templates(value, path)
    return TemplateSet(
        location=path,
        templates=templates,
        named=named,
        rule=rule,
        special_tokens=special,
        metadata={"add_bos_token": config.get("add_bos_token"), "add_eos_token": config.get("add_eos_token")},
    )


def load_config_file(path: str | Path, name: str | None = None) -> TemplateRecord:
    """A ``tokenizer_config.json`` or ``chat_template.json`` given on its own: its template and special tokens only."""
    path = Path(path)
    config = read_json_file(path)
    if path.name == PROCESSOR_CHAT_TEMPLATE_FILE or ("chat_template" in config and len(config) == 1 and path.name != TOKENIZER_CONFIG_FILE):
        rule = "chat_template.json given directly (the processor's legacy template file)"
        special: dict[str, str] = {}
    else:
        rule = "tokenizer_config.json given directly (a folder's chat_template.jinja, if any, is not consulted)"
        special = special_tokens_map(config, str(path))
    return select_template(_config_set(config, path, rule, special), name)


#: where a template given as a dict says it came from (``<dict>#chat_template[tool_use]``)
DICT_LOCATION = "<dict>"


def load_config_dict(config: dict[str, Any], name: str | None = None) -> TemplateRecord:
    """A dict given as a template, read as a ``tokenizer_config.json`` is (:func:`load_config_file`).

    Either ``tokenizer_config.json``-shaped (``{"chat_template": ..., "bos_token": ...}``, the
    template a string, a list of ``{"name", "template"}`` or a dict; the special tokens as in the
    file), or named template sources (``{"default": ..., "tool_use": ...}``, read as that file's
    ``chat_template`` dict). Any other shape raises one ``LoadError``.
    """
    where = Path(DICT_LOCATION)
    if not isinstance(config, dict):
        raise LoadError(f"a template dict must be a dict, got {type(config).__name__}", source_name=DICT_LOCATION)
    bad_key = next((key for key in config if not isinstance(key, str)), None)
    if bad_key is not None:
        raise LoadError(f"a template dict's keys must be strings, got {type(bad_key).__name__} {bad_key!r:.80}", source_name=DICT_LOCATION)
    if "chat_template" in config:
        if config["chat_template"] is None:
            raise LoadError(f"{DICT_LOCATION}#chat_template is None: no template to load", source_name=DICT_LOCATION)
        special = special_tokens_map(config, DICT_LOCATION)
        return select_template(_config_set(config, where, "a tokenizer_config.json-shaped dict", special), name)
    if config and all(isinstance(value, str) for value in config.values()) and not any(key.endswith("_token") for key in config):
        tset = _config_set({"chat_template": config}, where, "a dict of named templates", {})
        return select_template(tset, name)
    raise LoadError(
        "a dict given as a template must be tokenizer_config.json-shaped ({\"chat_template\": ..., \"bos_token\": ...}) "
        "or named template sources ({\"default\": ..., \"tool_use\": ...}); this one has no 'chat_template' "
        f"and {'is empty' if not config else 'is not template strings by name: keys ' + repr(sorted(config))[:120]}",
        source_name=DICT_LOCATION,
    )
