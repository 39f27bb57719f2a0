"""One API: every parameter of transformers' ``apply_chat_template`` (read from its signature at test
time) is ``ChatTemplate.render``'s, with the same ids and masks, or a one-line ``TypeError``; none is a
template variable."""

from __future__ import annotations

import copy
import inspect
import shutil
from pathlib import Path
from typing import Any

import pytest

import chatjinja
from chatjinja.batch import render_record
from chatjinja.runtime.render import TOKENIZE_PARAMETERS, TRANSFORMERS_PARAMETERS, UNSUPPORTED_PARAMETERS
from chatjinja.template import RENDER_PARAMETERS
from tests.training.test_reference import _outcome

pytestmark = pytest.mark.reference

# prints the tools and documents, so those parameters show in the ids
TEMPLATE = (
    "{{ bos_token }}{% if tools %}<|im_start|>system\n{{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{% if documents %}<|im_start|>system\n{% for d in documents %}{{ d.title }}: {{ d.text }}\n{% endfor %}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.role == 'assistant' %}{% generation %}{{ m.content }}<|im_end|>{% endgeneration %}"
    "{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
OTHER = "{% for m in messages %}[{{ m.role }}] {% generation %}{{ m.content }}{% endgeneration %}\n{% endfor %}"
CHAT = [
    {"role": "user", "content": "hello <|im_end|> world"},
    {"role": "assistant", "content": "fine thanks"},
    {"role": "user", "content": "and you"},
    {"role": "assistant", "content": "the quick brown fox"},
]
TOOL = {"type": "function", "function": {"name": "call", "description": "d", "parameters": {"type": "object", "properties": {}}}}

# one case (or more) for every parameter of transformers' apply_chat_template that chatjinja supports
CASES: dict[str, dict[str, Any]] = {
    "tools": {"tools": [TOOL]},
    "documents": {"documents": [{"title": "done", "text": "more again"}]},
    "chat_template": {"chat_template": OTHER},
    "add_generation_prompt": {"add_generation_prompt": True},
    "continue_final_message": {"continue_final_message": True},
    "tokenize": {"tokenize": False},
    "sanitize_control_tokens": {"sanitize_control_tokens": True},
    "padding": {"padding": "max_length", "max_length": 80},
    "truncation": {"truncation": True, "max_length": 12},
    "max_length": {"max_length": 20, "truncation": True, "padding": "max_length"},
    "return_tensors": {"return_tensors": "np", "padding": True},
    "return_dict": {"return_dict": False},
    "return_assistant_tokens_mask": {"return_assistant_tokens_mask": True},
    "tokenizer_kwargs": {"padding": True, "tokenizer_kwargs": {"padding_side": "left", "pad_to_multiple_of": 8}},
}


def _signature_names(function: Any) -> set[str]:
    return {
        name
        for name, parameter in inspect.signature(function).parameters.items()
        if name not in ("self", "conversation") and parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
    }


def transformers_parameters() -> set[str]:
    """The named parameters of transformers' ``apply_chat_template``: a tokenizer's and a processor's."""
    from transformers import PreTrainedTokenizerBase, ProcessorMixin

    return _signature_names(PreTrainedTokenizerBase.apply_chat_template) | _signature_names(ProcessorMixin.apply_chat_template)


def test_every_transformers_parameter_is_supported_or_refused() -> None:
    names = transformers_parameters()
    supported = names - set(UNSUPPORTED_PARAMETERS)
    # a new parameter in transformers fails here until it is supported (with its case below) or refused
    assert supported <= set(RENDER_PARAMETERS), f"neither supported nor refused: {sorted(supported - set(RENDER_PARAMETERS))}"
    assert supported == set(TRANSFORMERS_PARAMETERS)
    assert set(CASES) == supported, "every supported parameter has its differential case"
    assert set(UNSUPPORTED_PARAMETERS) <= names, "only transformers' own parameters are refused"


@pytest.mark.parametrize("name", sorted(UNSUPPORTED_PARAMETERS))
def test_an_unsupported_parameter_is_a_type_error(name: str) -> None:
    template = chatjinja.ChatTemplate("{{ messages[0].content }}")
    for call in (
        lambda: template.render(CHAT, **{name: {}}),
        lambda: chatjinja.apply_chat_template(CHAT, template, **{name: {}}),
        lambda: template.render(CHAT, variables={name: {}}),
        lambda: chatjinja.render_batch(template, [CHAT], **{name: {}}),
    ):
        with pytest.raises(TypeError, match=f"^{name}= is a parameter of transformers' apply_chat_template that chatjinja does not support"):
            call()
    error = render_record(template, {"messages": CHAT, name: {}})["error"]
    assert error.startswith(f"TypeError: {name}= is a parameter") and "\n" not in error


@pytest.mark.parametrize("name", TRANSFORMERS_PARAMETERS)
def test_a_transformers_parameter_is_never_a_template_variable(name: str) -> None:
    template = chatjinja.ChatTemplate("[{{ messages[0].content }}|{{ %s }}]" % name)
    with pytest.raises(TypeError, match=f"^{name!r} is a parameter, not only a template variable: pass {name}=..."):
        template.render(CHAT, variables={name: "VAL"})
    if name in TOKENIZE_PARAMETERS:  # a record's or input object's key cannot set a call's tokenizing
        error = render_record(template, {"messages": CHAT, name: "VAL"})["error"]
        assert error == (f"TypeError: {name!r} is a parameter of transformers' apply_chat_template, not a template "
                         "variable: a record cannot set it (tokenizing options are the call's)")


@pytest.fixture(scope="module")
def model(bpe_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trained BPE as a model folder whose own chat template is TEMPLATE."""
    folder = tmp_path_factory.mktemp("model") / "model"
    shutil.copytree(bpe_folder, folder)
    (folder / "chat_template.jinja").write_text(TEMPLATE, encoding="utf-8")
    return folder


def _comparable(value: Any) -> Any:
    if isinstance(value, tuple) or isinstance(value, (str, list)):
        return value
    return {key: (value.tolist(), str(value.dtype)) if hasattr(value, "tolist") else value for key, value in value.items()}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("masks", [True, False], ids=["masks", "no-masks"])
def test_render_equals_transformers_for_every_option(model: Path, name: str, masks: bool) -> None:
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(model))
    template = chatjinja.load_template(model)
    assert template.tokenizer == str(model)
    options = {"tokenize": True, "return_assistant_tokens_mask": masks, **CASES[name]}
    if name == "sanitize_control_tokens" and masks:
        options["return_assistant_tokens_mask"] = False  # with masks it is chatjinja's extension (test_tokenize.py)
    for conversation in (CHAT, [CHAT, CHAT[:2]]):
        ours = _outcome(lambda: template.render(copy.deepcopy(conversation), **options))
        theirs = _outcome(lambda: reference.apply_chat_template(copy.deepcopy(conversation), **options))
        assert _comparable(ours) == _comparable(theirs), f"{name} {options}"
