"""Model folders, differentially: the template(s), special tokens and renders transformers 5.25.0 loads from the same folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chatjinja import LoadError, TemplateNotFound, load_template
from chatjinja.loading import scan_model_folder
from tests.reference import outcome

pytestmark = pytest.mark.reference

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {}}}}]
CONVERSATION = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"}]

# Every template prints which one it is and every special token transformers may pass.
PROBE = (
    "{{ bos_token | default('') }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
    "{{ eos_token | default('') }}|unk={{ unk_token | default('-') }}|pad={{ pad_token | default('-') }}"
    "|sep={{ sep_token | default('-') }}|img={{ image_token | default('-') }}|tools={{ tools | length if tools else 0 }}"
)


def tpl(label: str) -> str:
    return f"<{label}>" + PROBE


def write_folder(root: Path, files: dict[str, Any], tokenizer: bool = True) -> Path:
    """A model folder: a tiny WordLevel ``tokenizer.json`` (``<unk>``, ``<s>``, ``</s>``) and the given files."""
    root.mkdir(parents=True, exist_ok=True)
    if tokenizer:
        from tokenizers import Tokenizer
        from tokenizers.models import WordLevel

        Tokenizer(WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2}, unk_token="<unk>")).save(str(root / "tokenizer.json"))
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_text(json.dumps(content, indent=2), encoding="utf-8")
    return root


def hf_tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def ours_as_transformers_holds_it(folder: Path) -> Any:
    tset = scan_model_folder(folder, rules="tokenizer")
    if not tset.templates:
        return None
    if tset.named:
        return {name: entry.source for name, entry in tset.templates.items()}
    return tset.templates["default"].source


def render_pair(tok: Any, folder: Path, **kwargs: Any) -> tuple[tuple, tuple]:
    theirs = outcome(lambda: tok.apply_chat_template(CONVERSATION, tokenize=False, **kwargs))

    def ours() -> str:
        return load_template(folder).render(CONVERSATION, **kwargs)

    return theirs, outcome(ours)


LAYOUTS: dict[str, dict[str, Any]] = {
    "jinja-file": {"chat_template.jinja": tpl("file"), "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>"}},
    "config-string": {"tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>", "chat_template": tpl("cfg")}},
    "config-list-default-and-tool-use": {
        "tokenizer_config.json": {
            "eos_token": "</s>",
            "chat_template": [{"name": "default", "template": tpl("default")}, {"name": "tool_use", "template": tpl("tool_use")}],
        }
    },
    "config-list-duplicate-names": {
        "tokenizer_config.json": {
            "chat_template": [{"name": "default", "template": tpl("first")}, {"name": "default", "template": tpl("second")}]
        }
    },
    "config-dict": {"tokenizer_config.json": {"chat_template": {"default": tpl("d"), "rag": tpl("rag")}}},
    "jinja-plus-additional": {
        "chat_template.jinja": tpl("file"),
        "additional_chat_templates/tool_use.jinja": tpl("tool-file"),
        "additional_chat_templates/rag.jinja": tpl("rag-file"),
        "tokenizer_config.json": {"bos_token": "<s>"},
    },
    "additional-only-drops-config": {
        "additional_chat_templates/tool_use.jinja": tpl("tool-file"),
        "tokenizer_config.json": {"chat_template": tpl("cfg-dropped")},
    },
    "conflict-jinja-beats-config": {
        "chat_template.jinja": tpl("file"),
        "tokenizer_config.json": {"bos_token": "<s>", "chat_template": tpl("cfg-loses")},
    },
    "conflict-jinja-beats-config-list": {
        "chat_template.jinja": tpl("file"),
        "tokenizer_config.json": {"chat_template": [{"name": "tool_use", "template": tpl("cfg-tool")}]},
    },
    "ambiguous-named-set": {
        "tokenizer_config.json": {"chat_template": [{"name": "a", "template": tpl("a")}, {"name": "b", "template": tpl("b")}]}
    },
    "legacy-chat-template-json-beside-jinja": {
        "chat_template.jinja": tpl("file"),
        "chat_template.json": {"chat_template": tpl("legacy")},
    },
    "empty-template-file": {"chat_template.jinja": "", "tokenizer_config.json": {"chat_template": tpl("cfg")}},
    # special tokens
    "tokens-added-token-objects": {
        "chat_template.jinja": tpl("t"),
        "tokenizer_config.json": {
            "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False},
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "pad_token": None,
            "sep_token": "",
            "image_token": "<img>",
            "video_token": {"__type": "AddedToken", "content": "<vid>"},
            "plain_dict_token": {"content": "<ignored>"},
            "add_bos_token": True,
            "add_eos_token": False,
        },
    },
    "tokens-special-tokens-map-overrides": {
        "chat_template.jinja": tpl("t"),
        "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "<old>"},
        "special_tokens_map.json": {
            "eos_token": {"content": "</s>", "lstrip": False, "special": True},
            "pad_token": "<unk>",
            "image_token": "<img>",
            "additional_special_tokens": ["<extra>"],
        },
    },
    "tokens-map-ignored-with-added-tokens-decoder": {
        "chat_template.jinja": tpl("t"),
        "tokenizer_config.json": {
            "bos_token": "<s>",
            "added_tokens_decoder": {"1": {"content": "<s>", "special": True, "lstrip": False, "rstrip": False, "normalized": False, "single_word": False}},
        },
        "special_tokens_map.json": {"eos_token": "</s>"},
    },
    "tokens-extra-special-dict": {
        "chat_template.jinja": tpl("t"),
        "tokenizer_config.json": {"extra_special_tokens": {"image_token": "<im>"}, "additional_special_tokens": ["<q>"]},
    },
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_folder_matches_transformers(tmp_path: Path, layout: str) -> None:
    folder = write_folder(tmp_path / layout, LAYOUTS[layout])
    tok = hf_tokenizer(folder)
    assert ours_as_transformers_holds_it(folder) == tok.chat_template
    assert scan_model_folder(folder).special_tokens == tok.special_tokens_map
    for kwargs in ({}, {"tools": TOOLS}, {"add_generation_prompt": True}):
        theirs, ours = render_pair(tok, folder, **kwargs)
        if theirs[0] == "error":
            assert ours[0] == "error" and ours[2].split(" (")[0] in theirs[2], (theirs, ours)
        else:
            assert ours == theirs, kwargs


@pytest.mark.parametrize(
    "layout, name, expected",
    [
        ("config-list-default-and-tool-use", "tool_use", "<tool_use>"),
        ("config-list-default-and-tool-use", "default", "<default>"),
        ("jinja-plus-additional", "rag", "<rag-file>"),
        ("ambiguous-named-set", "b", "<b>"),
    ],
)
def test_named_selection_matches_transformers(tmp_path: Path, layout: str, name: str, expected: str) -> None:
    folder = write_folder(tmp_path / layout, LAYOUTS[layout])
    tok = hf_tokenizer(folder)
    theirs = tok.apply_chat_template(CONVERSATION, chat_template=name, tokenize=False)
    template = load_template(folder, name)
    assert template.render(CONVERSATION) == theirs
    assert template.render(CONVERSATION, tools=TOOLS) == tok.apply_chat_template(CONVERSATION, chat_template=name, tools=TOOLS, tokenize=False)
    assert theirs.startswith(expected)
    assert template.metadata["chat_template_name"] == name


def test_origin_explains_the_choice(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", LAYOUTS["conflict-jinja-beats-config"])
    template = load_template(folder)
    assert template.name == str(folder / "chat_template.jinja")
    assert "tokenizer rule" in template.origin and "tokenizer_config.json's chat_template is ignored" in template.origin
    assert "it differs" in template.origin
    tset = scan_model_folder(folder)
    assert [entry.where for entry in tset.shadowed] == [f"{folder / 'tokenizer_config.json'}#chat_template"]

    folder = write_folder(tmp_path / "n", LAYOUTS["config-list-default-and-tool-use"])
    template = load_template(folder)
    assert template.name == f"{folder / 'tokenizer_config.json'}#chat_template[default]"
    assert "'tool_use' is used instead when tools are given" in template.origin


def test_chat_template_json_is_processor_only(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "p", {"chat_template.json": {"chat_template": tpl("legacy")}, "tokenizer_config.json": {"bos_token": "<s>"}})
    assert hf_tokenizer(folder).chat_template is None
    with pytest.raises(TemplateNotFound):
        load_template(folder, rules="tokenizer")
    template = load_template(folder)  # auto: falls back to what AutoProcessor reads
    assert template.source == tpl("legacy")
    assert "processor rule" in template.origin and "AutoProcessor" in template.origin


def test_processor_rule_matches_transformers_processor(tmp_path: Path) -> None:
    from transformers import ProcessorMixin

    folder = write_folder(
        tmp_path / "p",
        {"chat_template.jinja": tpl("file"), "chat_template.json": {"chat_template": tpl("legacy")}, "tokenizer_config.json": {}},
    )
    # what ProcessorMixin.from_pretrained hands the processor as chat_template
    processor_dict, _ = ProcessorMixin.get_processor_dict(str(folder))
    assert load_template(folder, rules="processor").source == processor_dict["chat_template"] == tpl("legacy")
    assert load_template(folder, rules="tokenizer").source == tpl("file")

    (folder / "additional_chat_templates").mkdir()
    (folder / "additional_chat_templates" / "tool_use.jinja").write_text("x")
    with pytest.raises(ValueError, match="conflicting files"):
        ProcessorMixin.get_processor_dict(str(folder))
    with pytest.raises(LoadError, match="conflicting chat templates") as info:
        load_template(folder, rules="processor")
    assert "chat_template.json" in str(info.value)


MALFORMED: dict[str, tuple[dict[str, Any], str]] = {
    "invalid-json-config": ({"tokenizer_config.json": '{\n  "bos_token": "<s>",\n  "chat_template": "x" oops\n}'}, r"tokenizer_config\.json:3:24"),
    "invalid-json-special-tokens-map": ({"chat_template.jinja": "x", "special_tokens_map.json": "{\n,}"}, r"special_tokens_map\.json:2:1"),
    "config-not-an-object": ({"tokenizer_config.json": "[1, 2]"}, r"tokenizer_config\.json must hold a JSON object"),
    "template-wrong-type": ({"tokenizer_config.json": {"chat_template": 5}}, r"tokenizer_config\.json#chat_template must be a string or a list"),
    "template-list-bad-entry": ({"tokenizer_config.json": {"chat_template": [{"template": "x"}]}}, r"#chat_template\[0\] must be an object with 'name' and 'template'"),
    "template-not-utf8": ({"chat_template.jinja": b"\xff\xfe{{ x }}"}, r"chat_template\.jinja is not UTF-8"),
    "named-token-plain-dict": ({"chat_template.jinja": "x", "tokenizer_config.json": {"bos_token": {"content": "<s>"}}}, r"bos_token must be a string or an AddedToken"),
    "no-template": ({"tokenizer_config.json": {"bos_token": "<s>"}}, r"no chat template in .*looked for chat_template\.jinja"),
    "ambiguous": (LAYOUTS["ambiguous-named-set"], r"multiple chat templates with no default specified.*\['a', 'b'\]"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_folder_gives_one_clear_error(tmp_path: Path, case: str) -> None:
    files, pattern = MALFORMED[case]
    folder = write_folder(tmp_path / case, files)
    with pytest.raises((LoadError, TemplateNotFound), match=pattern) as info:
        load_template(folder)
    assert str(folder) in str(info.value) or str(folder) in (info.value.source_name or "")
    assert "\n" not in str(info.value)
    # transformers fails too, at load time or at the first render
    theirs = outcome(lambda: hf_tokenizer(folder).apply_chat_template(CONVERSATION, tokenize=False))
    if case == "template-not-utf8":
        assert theirs[0] == "error"
    elif case not in ("invalid-json-special-tokens-map",):  # special tokens map errors only surface in a tokenizer
        assert theirs[0] == "error", theirs


def test_invalid_json_special_tokens_map_fails_in_transformers_too(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", MALFORMED["invalid-json-special-tokens-map"][0])
    assert outcome(lambda: hf_tokenizer(folder))[0] == "error"


def test_tokenizer_config_file_given_directly(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", LAYOUTS["config-list-default-and-tool-use"])
    template = load_template(folder / "tokenizer_config.json")
    assert template.source == tpl("default")
    assert template.special_tokens == {"eos_token": "</s>"}
    assert template.render(CONVERSATION, tools=TOOLS).startswith("<tool_use>")
    assert load_template(folder / "tokenizer_config.json", "tool_use").source == tpl("tool_use")
    with pytest.raises(TemplateNotFound, match="no chat template named 'nope'.*default, tool_use"):
        load_template(folder / "tokenizer_config.json", "nope")


def test_tool_use_only_renders_with_tools_only(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", LAYOUTS["additional-only-drops-config"])
    template = load_template(folder)
    assert template.source == tpl("tool-file")
    assert "there is no 'default'" in template.origin
    with pytest.raises(ValueError, match="no default specified"):
        template.render(CONVERSATION)
    assert template.render(CONVERSATION, tools=TOOLS).startswith("<tool-file>")


def test_bundled_names_and_template_files_still_load(tmp_path: Path) -> None:
    assert load_template("mistral-v1").name == "mistral-v1"
    path = tmp_path / "t.jinja"
    path.write_text("{{ messages[0].content }}")
    assert load_template(path).render(CONVERSATION) == "Hello"
    with pytest.raises(TemplateNotFound, match="^file not found: .*missing.jinja$"):
        load_template(tmp_path / "missing.jinja")
    with pytest.raises(TemplateNotFound, match="no template file, bundled template or model named 'missing-model' .*no model folder or GGUF"):
        load_template("missing-model")


def test_hash_suffix_names_a_template(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", LAYOUTS["jinja-plus-additional"])
    assert load_template(f"{folder}#rag").source == tpl("rag-file")
    assert load_template(f"{folder}#default").source == tpl("file")
    with pytest.raises(TemplateNotFound, match=r"no chat template named 'nope' \(available: default, rag, tool_use\)"):
        load_template(f"{folder}#nope")
    odd = tmp_path / "odd#name.jinja"  # an existing path with '#' is taken as it is
    odd.write_text("x")
    assert load_template(odd).source == "x"


def test_cli_analyze_says_which_template_was_chosen_and_why(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from chatjinja.cli import main

    folder = write_folder(tmp_path / "m", LAYOUTS["conflict-jinja-beats-config"])
    main(["analyze", str(folder)])
    out = capsys.readouterr().out
    assert out.startswith(f"{folder / 'chat_template.jinja'}\n  loaded ")
    assert "tokenizer_config.json's chat_template is ignored because template files exist (it differs" in out


def test_pad_token_from_tokenizer_json_padding(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", {"chat_template.jinja": tpl("t"), "tokenizer_config.json": {"eos_token": "</s>"}})
    data = json.loads((folder / "tokenizer.json").read_text())
    data["padding"] = {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": None, "pad_id": 2,
                       "pad_type_id": 0, "pad_token": "</s>"}
    (folder / "tokenizer.json").write_text(json.dumps(data))
    tok = hf_tokenizer(folder)
    assert tok.special_tokens_map == {"eos_token": "</s>", "pad_token": "</s>"}
    assert scan_model_folder(folder).special_tokens == tok.special_tokens_map


# -- a tokenizer_config.json (or named templates) given as a dict ----------------------------------

# the layouts made of a tokenizer_config.json alone, and the special-token ones with their template moved into the config
CONFIG_LAYOUTS = sorted(n for n, files in LAYOUTS.items() if set(files) == {"tokenizer_config.json"}) + [
    "tokens-added-token-objects",
    "tokens-extra-special-dict",
]


def config_of(layout: str) -> dict[str, Any]:
    files = LAYOUTS[layout]
    config = dict(files["tokenizer_config.json"])
    if "chat_template.jinja" in files:
        config["chat_template"] = files["chat_template.jinja"]
    return config


@pytest.mark.parametrize("layout", CONFIG_LAYOUTS)
def test_config_dict_loads_as_transformers_loads_the_file(tmp_path: Path, layout: str) -> None:
    import copy

    config = config_of(layout)
    tok = hf_tokenizer(write_folder(tmp_path / layout, {"tokenizer_config.json": config}))
    names = sorted(tok.chat_template) if isinstance(tok.chat_template, dict) else []
    loaded = outcome(lambda: load_template(copy.deepcopy(config)))
    if loaded[0] == "text":
        assert loaded[1].special_tokens == tok.special_tokens_map
        assert loaded[1].metadata.get("chat_templates", loaded[1].source) == tok.chat_template
    for kwargs in ({}, {"tools": TOOLS}, {"add_generation_prompt": True}):
        theirs = outcome(lambda: tok.apply_chat_template(CONVERSATION, tokenize=False, **kwargs))
        ours = outcome(lambda: load_template(copy.deepcopy(config)).render(CONVERSATION, **kwargs))
        if theirs[0] == "error":  # a named set with no default: transformers' message, at load time here
            assert ours[0] == "error" and ours[2].split(" (")[0] in theirs[2], (theirs, ours)
        else:
            assert ours == theirs, kwargs
    for name in names:
        theirs = tok.apply_chat_template(CONVERSATION, chat_template=name, tokenize=False)
        assert load_template(copy.deepcopy(config), name).render(CONVERSATION) == theirs
        if loaded[0] == "text":
            assert loaded[1].render(CONVERSATION, chat_template=name) == theirs


def test_dict_of_named_templates_is_the_config_s_chat_template_dict(tmp_path: Path) -> None:
    named = {"default": tpl("d"), "tool_use": tpl("t"), "rag": tpl("rag")}
    tok = hf_tokenizer(write_folder(tmp_path / "m", {"tokenizer_config.json": {"chat_template": named}}))
    template = load_template(named)
    assert template.metadata["chat_templates"] == tok.chat_template == named
    assert template.special_tokens == {}
    assert template.name == "<dict>#chat_template[default]"
    for kwargs in ({}, {"tools": TOOLS}, {"chat_template": "rag"}, {"chat_template": "{{ 'inline' }}"}):
        assert template.render(CONVERSATION, **kwargs) == tok.apply_chat_template(CONVERSATION, tokenize=False, **kwargs)
    assert load_template(named, "rag").source == tpl("rag")
    with pytest.raises(TemplateNotFound, match="no chat template named 'nope'"):
        load_template(named, "nope")


@pytest.mark.parametrize(
    "config, message",
    [
        ({}, "has no 'chat_template' and is empty"),
        ({"bos_token": "<s>"}, "has no 'chat_template' and is not template strings by name"),
        ({"default": "x", "rag": 3}, "has no 'chat_template' and is not template strings by name"),
        ({"chat_template": 3}, r"<dict>#chat_template must be a string or a list"),
        ({"chat_template": None}, r"<dict>#chat_template is None"),
        ({"chat_template": [{"name": "a"}]}, r"<dict>#chat_template\[0\] must be an object with 'name' and 'template'"),
        ({"chat_template": {"a": 1}}, r"<dict>#chat_template\[a\] must be a string"),
        ({"chat_template": "x", "bos_token": {"content": "<s>"}}, "<dict>: bos_token must be a string or an AddedToken"),
        ({1: "x"}, "keys must be strings"),
        ({"chat_template": [{"name": "a", "template": "A"}, {"name": "b", "template": "B"}]}, "no default specified"),
    ],
)
def test_bad_dict_shapes_give_one_load_error(config: dict, message: str) -> None:
    with pytest.raises(LoadError, match=message) as caught:
        load_template(config)
    assert "\n" not in str(caught.value)


def test_load_template_of_a_wrong_type_says_what_it_takes() -> None:
    with pytest.raises(TypeError, match="load_template takes a path, a name or a dict"):
        load_template(42)  # type: ignore[arg-type]
    assert load_template(Path(__file__).parents[2] / "templates" / "mistral-v1.jinja").source.startswith("{")


def test_template_and_model_files_are_read_under_the_input_cap(tmp_path):
    """A template file or a model folder's files over the cap are refused by their size, before a byte
    is read (an 80 MiB sparse file: the default cap is 64 MiB), and ``limited_inputs`` sets the cap."""
    import tracemalloc

    from chatjinja.errors import LoadError
    from chatjinja.files import limited_inputs
    from chatjinja import load_template

    big = tmp_path / "big.jinja"
    with open(big, "wb") as f:
        f.truncate(80 * 1024 * 1024)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text('{"chat_template": "' + "x" * 2000 + '"}')
    tracemalloc.start()
    try:
        with pytest.raises(LoadError, match=r"big\.jinja is larger than the input limit of 67108864 bytes"):
            load_template(big)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    assert load_template(folder).source == "x" * 2000
    with limited_inputs(1000), pytest.raises(LoadError, match=r"tokenizer_config\.json is larger than the input limit of 1000"):
        load_template(folder)


@pytest.mark.parametrize("command", ["render", "analyze", "lint", "diff"])
def test_cli_max_input_bytes_caps_the_template_file(command, tmp_path, capsys):
    from chatjinja.cli import main

    template = tmp_path / "t.jinja"
    template.write_text("{{ messages[0].content }}" * 10)
    args = [command, "--max-input-bytes", "100", str(template)] + ([str(template)] if command == "diff" else [])
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "t.jinja is larger than the input limit of 100 bytes" in err
