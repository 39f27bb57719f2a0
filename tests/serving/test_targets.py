"""response_template's targets (transformers, vLLM) and writing the derived template into a model folder."""

from __future__ import annotations

import json
from typing import Any

import pytest

import chatjinja
from chatjinja.cli import main
from chatjinja.serving.derive import ResponseTemplateError
from chatjinja.serving.emit import ReplyFormat, Unexpressible, to_transformers, to_vllm
from chatjinja.serving.rules import _GOOD

chat_parsing = pytest.importorskip("transformers.utils.chat_parsing")

HERMES = _GOOD
THINKING = ("{%- for m in messages %}<|{{ m['role'] }}|>{%- if m.get('reasoning_content') %}<think>{{ m['reasoning_content'] }}"
            "</think>{%- endif %}{{ m['content'] }}<|end|>{%- endfor %}{%- if add_generation_prompt %}<|assistant|>{%- endif %}")
# reasoning, calls and content in one template: every field vLLM routes
BOTH = THINKING.replace("{{ m['content'] }}", "{{ m['content'] }}{%- for c in m.get('tool_calls') or [] %}<tool_call>"
                        "{{ {'name': c['function']['name'], 'arguments': c['function']['arguments']} | tojson }}</tool_call>"
                        "{%- endfor %}")


# A documented copy of vLLM 0.34.0's serving rules, vllm/parser/response_template.py,
# validate_response_template_for_serving (what `--reasoning-parser hf` / `--tool-call-parser hf` accept).
# It first calls vllm/parser/chat_parsing/response_templates.py load_response_template, which is
# transformers' chat_parsing loader copied into vLLM (its header keeps HuggingFace's copyright; the same
# shape, field-key, anchor, transform and named-group checks), so the test calls transformers' loader for
# that part. Why not vLLM's own file: the vllm 0.34.0 wheel is hundreds of MB (CUDA kernels), and
# response_template.py imports vllm.entrypoints, vllm.parser.engine and openai, which reach torch; a
# test that downloads the wheel to unpack two files is not one CI should run. Re-read the two files when
# the vLLM version changes.
VLLM_FIELDS = frozenset({"thinking", "content", "tool_calls"})


def vllm_validate(template: dict[str, Any]) -> Any:
    loaded = chat_parsing.response_templates.load_response_template(template)
    unsupported = (set(loaded.fields) - VLLM_FIELDS) | (set(loaded.defaults) - {"role"})
    if unsupported:
        raise ValueError(f"response_template contains unsupported semantic fields: {sorted(unsupported)}")
    for name in ("thinking", "content"):
        field = loaded.fields.get(name)
        if field is not None and (field.content != "text" or field.transform is not None or field.join is not None):
            raise ValueError(f"response_template field {name!r} uses semantics that cannot be streamed")
    return loaded


def _prompt(template: str) -> str:
    return chatjinja.apply_chat_template([{"role": "user", "content": "hi"}], template, add_generation_prompt=True)


def test_the_rules_copy_rejects_what_vllm_rejects() -> None:
    transformers_template = chatjinja.response_template(THINKING)
    with pytest.raises(ValueError, match="reasoning_content"):
        vllm_validate(transformers_template)
    with pytest.raises(ValueError, match="'content'"):
        vllm_validate({"start_anchor": "a", "fields": {"content": {"content": "json"}}})


@pytest.mark.parametrize("template", [HERMES, THINKING, BOTH])
def test_the_vllm_target_passes_vllms_rules_and_reads_the_same_message(template: str) -> None:
    derived = chatjinja.response_template(template, target="vllm")
    vllm_validate(derived)
    assert derived == {**chatjinja.response_template(template),
                       "fields": {("thinking" if k == "reasoning_content" else k): v
                                  for k, v in chatjinja.response_template(template)["fields"].items()}}
    reply = '<think>hmm</think>Sure.<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call><|end|>'
    if template is BOTH:
        message = chat_parsing.parse_response(reply, derived, prefix=_prompt(template))
        assert message == {"role": "assistant", "thinking": "hmm", "content": "Sure.", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}


def test_a_format_vllm_cannot_stream_raises_one_line() -> None:
    transformed = ReplyFormat("<|assistant|>", {}, {"open": "<think>", "close": "</think>", "content": "json",
                                                    "transform": {"x": "{content}"}})
    to_transformers(transformed)  # transformers can express it
    with pytest.raises(Unexpressible, match="reasoning as plain text"):
        to_vllm(transformed)
    joined = ReplyFormat("<|assistant|>", {}, {"open": "<think>", "close": "</think>", "repeats": True, "join": "\n"})
    with pytest.raises(Unexpressible, match="needs a join"):
        to_vllm(joined)


def test_response_template_names_the_target_that_cannot(monkeypatch) -> None:
    from chatjinja.serving import derive
    reply = derive.derive_source_format(THINKING, "t", strict=True, tokens=())[1]
    odd = ReplyFormat(reply.anchor, reply.content, {**reply.reasoning, "transform": {"r": "{content}"}})
    monkeypatch.setattr(derive, "derive_source_format", lambda *a, **k: (None, odd))
    monkeypatch.setattr(derive, "_cache", type(derive._cache)())
    with pytest.raises(ResponseTemplateError, match="the vllm target cannot express") as caught:
        chatjinja.response_template(THINKING, target="vllm")
    assert "\n" not in str(caught.value)
    assert "transform" in chatjinja.response_template(THINKING)["fields"]["reasoning_content"]
    with pytest.raises(ValueError, match="unknown target"):
        chatjinja.response_template(THINKING, target="sglang")


def _model_folder(path, config: str):
    """A folder transformers loads a tokenizer from: a tokenizers-only tokenizer.json and ``config``."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    Tokenizer(WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2}, unk_token="<unk>")).save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(config, encoding="utf-8", newline="")
    return path


CONFIG = '{\n    "tokenizer_class": "PreTrainedTokenizerFast",\n    "unk_token": "<unk>",\r\n  "odd":   [1,2],\n' \
         '    "response_template": {"old": true},\n    "model_max_length": 8\n}'


@pytest.mark.parametrize("target", ["transformers", "vllm"])
def test_written_into_a_model_folder_transformers_loads_and_reads_it(tmp_path, target: str) -> None:
    from transformers import AutoTokenizer
    folder = _model_folder(tmp_path, CONFIG)
    derived = chatjinja.response_template(THINKING, target=target)
    assert chatjinja.write_response_template(folder, derived) == folder / "tokenizer_config.json"
    written = (folder / "tokenizer_config.json").read_bytes().decode("utf-8")
    before, after = CONFIG.split('{"old": true}')
    assert written.startswith(before) and written.endswith(after)  # every other byte kept
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    assert tokenizer.response_template == derived == tokenizer.init_kwargs["response_template"]  # where vLLM reads it
    reasoning = "reasoning_content" if target == "transformers" else "thinking"
    message = tokenizer.parse_response("<think>hmm</think>42<|end|>", prefix=_prompt(THINKING))
    assert (message[reasoning], message["content"]) == ("hmm", "42")


def test_a_folder_without_the_key_gets_it_last(tmp_path) -> None:
    folder = _model_folder(tmp_path, '{"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>"}')
    chatjinja.write_response_template(folder, {"start_anchor": "a", "fields": {"content": {}}})
    written = (folder / "tokenizer_config.json").read_text(encoding="utf-8")
    assert written.startswith('{"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "response_template"')
    assert json.loads(written)["response_template"] == {"start_anchor": "a", "fields": {"content": {}}}


def test_the_cli_writes_into_a_model_folder_or_refuses_in_one_line(tmp_path, capsys) -> None:
    (tmp_path / "t.jinja").write_text(THINKING, encoding="utf-8")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["response-template", str(tmp_path / "t.jinja"), "--write-into", str(empty)]) == 1
    err = capsys.readouterr().err
    assert "has no tokenizer_config.json" in err and err.count("\n") == 1 and not list(empty.iterdir())
    folder = _model_folder(tmp_path, CONFIG)
    assert main(["response-template", str(tmp_path / "t.jinja"), "--target", "vllm", "--write-into", str(folder)]) == 0
    assert capsys.readouterr().out == ""
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["response_template"] == chatjinja.response_template(THINKING, target="vllm")
    assert main(["response-template", str(tmp_path / "t.jinja"), "--target", "vllm"]) == 0
    assert "thinking" in json.loads(capsys.readouterr().out)["fields"]
