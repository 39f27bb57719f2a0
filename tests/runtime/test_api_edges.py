"""The API's edges against transformers 5.25.0: variables of any name, ``variables=``, named templates and template arguments."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import jinja2
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import chatjinja
from chatjinja import ChatTemplate, LoadError, apply_chat_template, load_template, render_batch
from chatjinja.cli import main
from chatjinja.batch import RenderFailure, render_jsonl, render_jsonl_dask, render_record
from chatjinja.runtime.render import PARAMETER_VARIABLES, TOKENIZE_PARAMETERS, UNSUPPORTED_PARAMETERS, render_source
from chatjinja.template import RENDER_PARAMETERS

from ..reference import SPECIAL_TOKENS, hf_tokenizer, outcome

pytestmark = pytest.mark.reference

MESSAGES = [{"role": "user", "content": "hi"}]

# Names that look like chatjinja's or transformers' own parameters, or like Python's
RESERVED_LOOKING = [
    "self", "conversation", "conversations", "chat_template", "tools", "documents", "add_generation_prompt",
    "continue_final_message", "return_assistant_spans", "budgets", "strict", "variables", "kwargs", "args",
    "template", "record", "options", "workers", "chunksize", "errors", "progress", "blocksize", "scheduler",
    "source", "name", "metadata", "special_tokens", "origin", "bos_token", "eos_token", "loop", "range",
    "namespace", "raise_exception", "tojson", "__class__", "_inputs", "_conversations_checked", "cls", "",
    "a-b", "1x", "with space", "ünïcode", "for", "true", "None",
]
# transformers' parameters that are not template variables there nor here, but a record cannot set
# (tests/training/test_api_parameters.py): its tokenizing options, and a processor's that chatjinja refuses
TOKENIZING = {*TOKENIZE_PARAMETERS, *UNSUPPORTED_PARAMETERS}


def probe_template(name: str) -> str:
    """``{{ name }}`` when that is a Jinja expression naming exactly this variable, else a template that ignores it."""
    try:
        body = jinja2.Environment().parse("{{ %s }}" % name).body
    except jinja2.TemplateSyntaxError:
        body = []
    if len(body) == 1 and isinstance(body[0].nodes[0], jinja2.nodes.Name) and body[0].nodes[0].name == name:
        return "[{{ messages[0].content }}|{{ %s }}]" % name
    return "[{{ messages[0].content }}]"


def theirs(template: str, /, **kwargs: Any) -> tuple:
    """transformers with ``template`` as the tokenizer's own (a ``chat_template=`` among ``kwargs`` replaces it, as there)."""
    kwargs = {"chat_template": template, **kwargs}
    return outcome(lambda: hf_tokenizer().apply_chat_template(copy.deepcopy(MESSAGES), tokenize=False, **kwargs))


def as_record_result(result: tuple) -> dict[str, str]:
    """A reference outcome as ``render_record`` writes it."""
    if result[0] == "text":
        return {"text": result[1]}
    return {"error": f"{result[1]}: {result[2].strip().splitlines()[0]}"}


# -- keyword variables and variables= --------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in RESERVED_LOOKING if n not in RENDER_PARAMETERS])
def test_keyword_variable_of_any_other_name_is_what_transformers_does(name: str) -> None:
    source = probe_template(name)
    expected = theirs(source, **{name: "VAL"})
    assert outcome(lambda: apply_chat_template(copy.deepcopy(MESSAGES), source, **{**SPECIAL_TOKENS, name: "VAL"})) == expected
    template = ChatTemplate(source, special_tokens=SPECIAL_TOKENS)
    assert outcome(lambda: template.render(copy.deepcopy(MESSAGES), **{name: "VAL"})) == expected


@pytest.mark.parametrize("name", ["budgets", "strict", "return_assistant_spans", "variables", "self", "conversation", "conversations", "messages"])
def test_variables_mapping_is_what_transformers_does_with_the_keyword(name: str) -> None:
    source = probe_template(name)
    expected = theirs(source, **{name: "VAL"})
    if name in ("budgets", "strict", "return_assistant_spans", "variables"):
        assert expected == ("text", "[hi|VAL]")  # plain variables in transformers
    ours = outcome(lambda: apply_chat_template(copy.deepcopy(MESSAGES), source, variables={name: "VAL", **SPECIAL_TOKENS}))
    assert ours == expected
    template = ChatTemplate(source, special_tokens=SPECIAL_TOKENS)
    assert outcome(lambda: template.render(copy.deepcopy(MESSAGES), variables={name: "VAL"})) == expected
    assert batch_outcome(lambda: render_batch(template, [MESSAGES], errors="return", variables={name: "VAL"})) == first_line(expected)


def first_line(result: tuple) -> tuple:
    return result if result[0] == "text" else (*result[:2], result[2].strip().splitlines()[0])


def batch_outcome(call: Any) -> tuple:
    """``outcome`` of a one-conversation ``render_batch(errors="return")``: its text, its failure, or what it raised."""
    result = outcome(call)
    if result[0] == "error":
        return first_line(result)
    (item,) = result[1]
    if isinstance(item, RenderFailure):
        kind, _, message = item.error.partition(": ")
        return ("error", kind, message)
    return ("text", item)


def test_transformers_errors_for_names_it_cannot_take() -> None:
    source = "{{ messages[0].content }}"
    for name, message in [
        ("self", "PreTrainedTokenizerBase.apply_chat_template() got multiple values for argument 'self'"),
        ("conversation", "PreTrainedTokenizerBase.apply_chat_template() got multiple values for argument 'conversation'"),
        ("conversations", "transformers.utils.chat_template_utils.render_jinja_template() got multiple values for keyword argument 'conversations'"),
        ("messages", "jinja2.environment.Template.render() got multiple values for keyword argument 'messages'"),
    ]:
        assert theirs(source, **{name: 1}) == ("error", "TypeError", message)
        assert outcome(lambda: apply_chat_template(MESSAGES, source, **{name: 1})) == ("error", "TypeError", message)


def test_variables_mapping_rules() -> None:
    template = ChatTemplate("{{ x }}{{ budgets }}{{ bos_token }}", special_tokens={"bos_token": "<s>"})
    # merged after the special tokens; a keyword and a variables= entry of one name is an error, not a silent winner
    assert template.render(MESSAGES, variables={"budgets": "B", "bos_token": "<b>"}, x=1) == "1B<b>"
    with pytest.raises(TypeError, match="'x' is given both as a keyword argument and in variables="):
        template.render(MESSAGES, variables={"x": 1}, x=2)
    for name in PARAMETER_VARIABLES:
        with pytest.raises(TypeError, match=f"pass {name}=..."):
            template.render(MESSAGES, variables={name: 1})
    with pytest.raises(TypeError, match="variables must be a mapping"):
        template.render(MESSAGES, variables=[("x", 1)])
    with pytest.raises(TypeError, match="names must be strings"):
        template.render(MESSAGES, variables={1: 2})
    # the runtime's render takes the variables as a plain mapping, any names
    assert render_source(MESSAGES, "{{ strict }}|{{ budgets }}", variables={"strict": "S", "budgets": "B"}) == "S|B"
    with pytest.raises(TypeError, match="render_jinja_template\\(\\) got multiple values for keyword argument 'conversations'"):
        render_source(MESSAGES, "x", variables={"conversations": 1})
    # budgets= stays chatjinja's parameter
    with pytest.raises(chatjinja.BudgetExceeded):
        template.render(MESSAGES, budgets={"max_output_chars": 1}, variables={"budgets": "B" * 10})


def test_render_parameters_are_the_signature() -> None:
    import inspect

    parameters = inspect.signature(ChatTemplate.render).parameters
    assert set(RENDER_PARAMETERS) == {n for n, p in parameters.items() if p.kind not in (p.POSITIONAL_ONLY, p.VAR_KEYWORD)}
    assert set(PARAMETER_VARIABLES) <= set(RENDER_PARAMETERS)
    # apply_chat_template passes each of its own on to render by name: the same names, but for the template itself
    own = inspect.signature(apply_chat_template).parameters
    assert {n for n in own if n not in ("conversation", "chat_template", "kwargs")} == set(RENDER_PARAMETERS) - {"chat_template"}


# -- input objects and batch records: a key of any name ------------------------------------------


# always tried, whatever else hypothesis draws
ALWAYS = ["self", "conversation", "conversations", "budgets", "strict", "return_assistant_spans", "variables", "chat_template", "tools", "continue_final_message", "_inputs", ""]


def with_examples(test: Any) -> Any:
    for name in ALWAYS:
        test = example(name=name)(test)
    return test


names = st.one_of(
    st.sampled_from(RESERVED_LOOKING),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=10),
).filter(lambda name: name != "messages" and name not in TOKENIZING)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=names)
@with_examples
def test_a_record_key_of_any_name_reaches_the_template_or_gets_transformers_error(name: str) -> None:
    source = probe_template(name)
    expected = as_record_result(theirs(source, **{name: "VAL"}))
    template = ChatTemplate(source, special_tokens=SPECIAL_TOKENS)
    result = render_record(template, {"messages": copy.deepcopy(MESSAGES), name: "VAL"})
    assert result == expected
    # never Python's complaint about one of chatjinja's own functions
    assert not re.search(r"(?<![.\w])(apply_chat_template|render|render_source|render_conversations|render_record)\(\) got", result.get("error", ""))


def _cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=names)
@with_examples
def test_a_cli_input_key_of_any_name_reaches_the_template_or_gets_transformers_error(name: str) -> None:
    source = probe_template(name)
    expected = theirs(source, **{name: "VAL"})
    with tempfile.TemporaryDirectory() as tmp:
        template_file = Path(tmp, "t.jinja")
        template_file.write_text(source, encoding="utf-8")
        input_file = Path(tmp, "in.json")
        input_file.write_text(json.dumps({"messages": MESSAGES, name: "VAL"}), encoding="utf-8")
        # the reference tokenizer's special tokens, as a model folder's would be
        Path(tmp, "tokenizer_config.json").write_text(json.dumps({"chat_template": source, **SPECIAL_TOKENS}), encoding="utf-8")
        code, out, err = _cli(["render", str(Path(tmp, "tokenizer_config.json")), "--input", str(input_file)])
    if expected[0] == "text":
        assert (code, out) == (0, expected[1]), err
    else:
        assert code == 1 and out == "" and "Traceback" not in err
        assert expected[2].strip().splitlines()[0] in err, err


def test_record_keys_named_like_safety_options_are_variables() -> None:
    template = ChatTemplate("{{ budgets }}|{{ strict }}|{{ return_assistant_spans }}|{{ variables }}|{{ workers }}")
    record = {"messages": MESSAGES, "budgets": None, "strict": True, "return_assistant_spans": 1, "variables": "v", "workers": 9}
    assert render_record(template, record) == {"text": "None|True|1|v|9"}
    # the caller's budgets still hold: a record cannot turn them off by naming them
    big = {"messages": MESSAGES, "budgets": None, "n": 1000}
    loop = ChatTemplate("{% for i in range(n) %}x{% endfor %}")
    assert "BudgetExceeded" in render_record(loop, big, {"budgets": {"max_loop_iterations": 10}})["error"]
    # the caller's variables and keywords apply; the record's own keys win
    options = {"variables": {"budgets": "caller"}, "strict": False, "x": "kw"}
    assert render_record(ChatTemplate("{{ budgets }}{{ x }}"), {"messages": MESSAGES}, options) == {"text": "callerkw"}
    assert render_record(ChatTemplate("{{ budgets }}{{ x }}"), {"messages": MESSAGES, "budgets": "own", "x": "y"}, options) == {"text": "owny"}


def test_render_batch_options_named_like_its_parameters_go_in_variables() -> None:
    template = ChatTemplate("{{ workers }}{{ errors }}{{ template }}")
    assert render_batch(template, [MESSAGES], variables={"workers": 1, "errors": 2}, template=3) == ["123"]
    with pytest.raises(TypeError, match="got multiple values for argument 'self'"):
        render_batch(template, [MESSAGES], self=1)
    with pytest.raises(TypeError, match="given both"):
        render_batch(template, [MESSAGES], variables={"x": 1}, x=1)


def test_cli_input_keys_named_like_options_are_variables(tmp_path: Path) -> None:
    source = tmp_path / "t.jinja"
    source.write_text("{{ strict }}|{{ budgets }}|{{ return_assistant_spans }}|{{ variables }}|{{ self_ }}")
    data = tmp_path / "in.json"
    data.write_text(json.dumps({"messages": MESSAGES, "strict": "S", "budgets": "B", "return_assistant_spans": "R", "variables": "V", "self_": 1}))
    assert _cli(["render", str(source), "--input", str(data)]) == (0, "S|B|R|V|1", "")
    data.write_text(json.dumps({"messages": MESSAGES, "self": 1}))
    code, out, err = _cli(["render", str(source), "--input", str(data)])
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "PreTrainedTokenizerBase.apply_chat_template() got multiple values for argument 'self'" in err


# -- chat_template=NAME: get_chat_template ---------------------------------------------------------


NAMED = {"default": "<default>{{ tools | length if tools else 0 }}", "tool_use": "<tool_use>{{ tools | length if tools else 0 }}", "rag": "<rag>"}
TOOLS = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}}]


def _tokenizer(chat_template: Any) -> Any:
    """The reference tokenizer (``<s>``, ``</s>``, ``<unk>``) holding this chat template (a string or named templates)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2}, unk_token="<unk>"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, chat_template=chat_template, **SPECIAL_TOKENS)


@pytest.mark.parametrize("templates", [NAMED, {k: v for k, v in NAMED.items() if k != "default"}, {"default": NAMED["default"]}, {"rag": "<rag>", "other": "<o>"}])
@pytest.mark.parametrize("chat_template", [None, "default", "tool_use", "rag", "missing", "{{ 'inline' }}", ""])
@pytest.mark.parametrize("tools", [None, TOOLS])
def test_chat_template_name_is_get_chat_template(templates: dict, chat_template: str | None, tools: Any) -> None:
    tok = _tokenizer(dict(templates))
    assert tok.chat_template == templates
    expected = outcome(lambda: tok.apply_chat_template(MESSAGES, chat_template=chat_template, tools=tools, tokenize=False))
    template = ChatTemplate(next(iter(templates.values())), metadata={"chat_templates": dict(templates)}, special_tokens=SPECIAL_TOKENS)
    assert outcome(lambda: template.render(MESSAGES, tools=tools, chat_template=chat_template)) == expected
    # the same set loaded from a dict of named templates
    if len(templates) > 1 and ("default" in templates or "tool_use" in templates):
        loaded = load_template({"chat_template": dict(templates), **SPECIAL_TOKENS})
        assert outcome(lambda: loaded.render(MESSAGES, tools=tools, chat_template=chat_template)) == expected


def test_chat_template_on_a_single_template_is_the_source_as_in_transformers() -> None:
    tok = _tokenizer("<single>")
    for chat_template in ("default", "{{ 1 + 1 }}"):
        expected = tok.apply_chat_template(MESSAGES, chat_template=chat_template, tokenize=False)
        assert ChatTemplate("<single>").render(MESSAGES, chat_template=chat_template) == expected
    with pytest.raises(TypeError, match="chat_template must be a template name or the template source"):
        ChatTemplate("x").render(MESSAGES, chat_template=3)


def test_chat_template_naming_an_existing_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jinja"
    path.write_text("{{ 1 }}")
    with pytest.raises(LoadError, match="load_template"):
        ChatTemplate("x").render(MESSAGES, chat_template=str(path))


# -- the template argument: str, Path, dict, ChatTemplate ------------------------------------------


@pytest.fixture
def template_file(tmp_path: Path) -> Path:
    path = tmp_path / "t.jinja"
    path.write_text("file:{{ messages[0].content }}{{ bos_token | default('') }}", encoding="utf-8")
    return path


def test_a_path_loads_the_file_everywhere(template_file: Path, tmp_path: Path) -> None:
    assert apply_chat_template(MESSAGES, template_file) == "file:hi"
    assert apply_chat_template(MESSAGES, chat_template=template_file, bos_token="<s>") == "file:hi<s>"
    assert render_batch(template_file, [MESSAGES]) == ["file:hi"]
    (tmp_path / "in.jsonl").write_text(json.dumps({"messages": MESSAGES}) + "\n")
    render_jsonl(template_file, tmp_path / "in.jsonl", tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_text() == '{"text": "file:hi"}\n'


def test_a_path_string_is_refused_everywhere(template_file: Path, tmp_path: Path) -> None:
    text = str(template_file)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text('{"chat_template": "x"}')
    for call in (
        lambda: apply_chat_template(MESSAGES, text),
        lambda: render_batch(text, [MESSAGES]),
        lambda: render_jsonl(text, tmp_path / "in.jsonl", tmp_path / "out.jsonl"),
        lambda: render_batch(str(folder), [MESSAGES]),  # a model folder's path too
    ):
        with pytest.raises(LoadError, match=r"names an existing (file|model folder).*load_template\("):
            call()
    # a folder that is no model folder is just text that happens to name one
    assert apply_chat_template(MESSAGES, str(tmp_path)) == str(tmp_path)
    assert not (tmp_path / "out.jsonl").exists()
    # a relative one too
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(ValueError, match="chatjinja.load_template\\('t.jinja'\\)"):
            apply_chat_template(MESSAGES, "t.jinja")
    finally:
        os.chdir(cwd)
    # template source is never taken for a path: Jinja syntax, or no such file
    assert apply_chat_template(MESSAGES, "{# " + text + " #}plain") == "plain"
    assert apply_chat_template(MESSAGES, text + ".missing") == text + ".missing"


def test_a_string_that_names_no_file_yet_is_refused_once_the_file_exists(tmp_path: Path) -> None:
    """Template sources are kept between calls (one ChatTemplate each), but a string with no Jinja syntax is looked
    at every time: rendered as text while no such file exists, refused as a path as soon as one does."""
    path = tmp_path / "later.jinja"
    assert apply_chat_template(MESSAGES, str(path)) == str(path)
    path.write_text("{{ messages[0].content }}")
    with pytest.raises(LoadError, match=r"names an existing file"):
        apply_chat_template(MESSAGES, str(path))
    source = "{{ messages[0].content }}!"
    from chatjinja.template import chat_template_argument

    assert chat_template_argument(source) is chat_template_argument(source)  # kept: Jinja syntax is never a path
    assert apply_chat_template(MESSAGES, source) == "hi!"


def test_dask_takes_a_path_and_refuses_a_path_string(template_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("dask.bag")
    (tmp_path / "in.jsonl").write_text(json.dumps({"messages": MESSAGES, "budgets": "v"}) + "\n")
    render_jsonl_dask(template_file, str(tmp_path / "in.jsonl"), tmp_path / "out.jsonl", scheduler="synchronous")
    assert (tmp_path / "out.jsonl").read_text() == '{"text": "file:hi"}\n'
    with pytest.raises(LoadError, match="load_template"):
        render_jsonl_dask(str(template_file), str(tmp_path / "in.jsonl"), tmp_path / "out2.jsonl", scheduler="synchronous")


def test_a_dict_or_chat_template_is_a_template_everywhere() -> None:
    config = {"chat_template": {"default": "D{{ bos_token }}", "tool_use": "T{{ bos_token }}"}, "bos_token": "<s>"}
    assert apply_chat_template(MESSAGES, config) == "D<s>"
    assert apply_chat_template(MESSAGES, config, tools=TOOLS) == "T<s>"
    assert render_batch(config, [MESSAGES]) == ["D<s>"]
    assert apply_chat_template(MESSAGES, load_template(config), bos_token="<b>") == "D<b>"
    with pytest.raises(TypeError, match="template must be a ChatTemplate, the template source, a pathlib.Path or a dict"):
        apply_chat_template(MESSAGES, 42)


def test_cli_input_chat_template_picks_a_named_template_as_transformers(tmp_path: Path) -> None:
    named = {"default": "<d>{{ messages[0].content }}", "rag": "<rag>{{ messages[0].content }}"}
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": named}))
    data = tmp_path / "in.json"
    tok = _tokenizer(dict(named))
    for chat_template in ("rag", "{{ 'inline' }}", "default"):
        data.write_text(json.dumps({"messages": MESSAGES, "chat_template": chat_template}))
        expected = tok.apply_chat_template(MESSAGES, chat_template=chat_template, tokenize=False)
        assert _cli(["render", str(config), "--input", str(data)]) == (0, expected, "")


def test_cli_batch_record_cannot_turn_the_budgets_off(tmp_path: Path) -> None:
    source = tmp_path / "t.jinja"
    source.write_text("{% for i in range(n) %}x{% endfor %}")
    records = tmp_path / "in.jsonl"
    records.write_text(json.dumps({"messages": MESSAGES, "budgets": None, "strict": False, "n": 50}) + "\n")
    out = tmp_path / "out.jsonl"
    code, _, err = _cli(["render", str(source), "--batch", str(records), "-o", str(out), "--max-loop-iterations", "10"])
    assert code == 1, err
    assert json.loads(out.read_text())["error"].startswith("BudgetExceeded: budget max_loop_iterations exceeded")
    code, _, err = _cli(["render", str(source), "--batch", str(records), "-o", str(out)])
    assert (code, json.loads(out.read_text())) == (0, {"text": "x" * 50}), err


def test_render_lines_takes_a_path_as_render_batch_does(template_file: Path) -> None:
    from chatjinja.batch import render_lines

    lines = [json.dumps({"messages": MESSAGES, "strict": 1}) + "\n"]
    assert render_lines(lines, template_file, {"bos_token": "<s>"}) == ['{"text": "file:hi<s>"}']
    with pytest.raises(LoadError, match="load_template"):
        render_lines(lines, str(template_file))


def test_the_probe_function_and_its_module_do_not_collide() -> None:
    """``chatjinja.probe`` is the function whatever was imported first: its module is ``chatjinja.probing``."""
    code = (
        "import chatjinja.probing, chatjinja, types\n"
        "assert isinstance(chatjinja.probe, types.FunctionType) and chatjinja.probe is chatjinja.probing.probe\n"
        "assert type(chatjinja.probing) is types.ModuleType\n"
    )
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", code], check=True)
