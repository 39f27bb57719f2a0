"""The properties trainers check (training/properties.py, the TR codes of ``chatjinja check``).

Ground truth is TRL's own functions. TRL (1.16.0) needs torch (accelerate), so its two checks are
written out below from ``trl/chat_template_utils.py`` (``is_chat_template_prefix_preserving`` and
``is_chat_template_stop_token_trained``, same messages, same fallbacks) and run at test time on
transformers 5.25.0 itself with the BPE trained for the tests, on every corpus template.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from chatjinja.cli import main
from chatjinja.lint.registry import all_rules, listed_rules
from chatjinja.release import check_model
from chatjinja.training.properties import PREFIX_SHAPES, extends, measure
from chatjinja.training.rules import TRAINING_RULES
from tests.conftest import CORPUS, REPO, corpus_templates
from tests.goldens import check_golden
from tests.release.test_folder_rules import folder_files, write
from tests.training.conftest import reference_tokenizer

COUNTS = Path(__file__).with_name("property_counts.txt")


# ---- the rule pages: the Example is reported, Use instead is not; the page is `chatjinja rules CODE`

@pytest.mark.parametrize("rule", TRAINING_RULES, ids=lambda r: r.code)
def test_example_reports_use_instead_does_not(rule, tmp_path) -> None:
    files = folder_files(rule.section("Example"))
    files["tokenizer_config.json"] = '{"eos_token": "</s>"}'
    found = [f for f in check_model(write(tmp_path / "bad", files)).findings if f.code.startswith("TR")]
    assert [f.code for f in found] == [rule.code], found
    files = folder_files(rule.section("Use instead"))
    files["tokenizer_config.json"] = '{"eos_token": "</s>"}'
    assert [f for f in check_model(write(tmp_path / "good", files)).findings if f.code.startswith("TR")] == []


@pytest.mark.parametrize("rule", TRAINING_RULES, ids=lambda r: r.code)
def test_page_is_the_rules_output(rule, capsys) -> None:
    assert main(["rules", rule.code]) == 0
    assert capsys.readouterr().out == (REPO / "docs" / "rules" / f"{rule.code}.md").read_text(encoding="utf-8")
    assert rule in listed_rules() and rule not in all_rules()


def test_the_facts_say_where() -> None:
    found = measure(TRAINING_RULES[0].example())
    assert found.prefix_preserving is False and found.generation_tags is False and found.stop_token_trained is None
    brk = found.prefix_break
    assert (brk.shape, brk.position, brk.added_role, brk.add_generation_prompt) == ("reasoning", 2, "user", False)
    assert brk.before.startswith("<think>think</think>ans") and brk.after.startswith("ans<|end|>")
    found = measure(TRAINING_RULES[2].example())
    assert found.stop_token_trained is True and found.trained_roles == ("system", "tool", "user")
    found = measure(TRAINING_RULES[1].example(), stop_tokens=["<|end|>"])
    assert found.stop_token_trained is False and found.last_trained == "dummy"
    assert measure(TRAINING_RULES[1].use_instead(), stop_tokens=["<|end|>"]).stop_token_trained is True


def test_a_break_with_the_generation_prompt_only() -> None:
    # a preamble written only with the generation prompt: only the add_generation_prompt=True render shows it
    source = ("{%- for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{%- endfor %}"
              "{%- if add_generation_prompt %}<|assistant|>{%- endif %}")
    assert measure(source).prefix_preserving is True
    brk = measure("{%- if add_generation_prompt %}<|system|>think<|end|>{%- endif %}" + source).prefix_break
    assert (brk.shape, brk.position, brk.add_generation_prompt) == ("chat", 1, True)


# ---- every corpus template: the counts (reviewed golden) and where prefixes break

def _where(path: Path) -> str:
    return path.relative_to(CORPUS / "templates").as_posix()


@pytest.fixture(scope="module")
def corpus_properties() -> dict[str, object]:
    paths = corpus_templates()
    if not paths:
        pytest.skip("the corpus is not present")
    return {_where(p): measure(p.read_text(encoding="utf-8")) for p in paths}


def test_corpus_counts(corpus_properties) -> None:
    counts = Counter()
    lines = []
    for where, found in sorted(corpus_properties.items()):
        counts["prefix-preserving" if found.prefix_preserving else
               "not measured (no prefix pair renders)" if found.prefix_preserving is None else "not prefix-preserving"] += 1
        counts[f"generation tags: {found.generation_tags}"] += 1
        if found.generation_tags:
            counts[f"end of turn trained: {found.stop_token_trained}"] += 1
            counts[f"non-assistant content trained: {', '.join(found.trained_roles) or 'none'}"] += 1
        if found.prefix_break is not None:
            brk = found.prefix_break
            counts[f"breaks at: {brk.shape} after {brk.position} (+{brk.added_role}"
                   f"{', generation prompt' if brk.add_generation_prompt else ''})"] += 1
            lines.append(f"{where}: {brk.shape} {brk.position} +{brk.added_role}{' gp' if brk.add_generation_prompt else ''}")
    text = (f"# training properties over {len(corpus_properties)} corpus templates (tests/training/test_properties.py)\n"
            + "".join(f"{key}: {value}\n" for key, value in sorted(counts.items()))
            + "\n# where each template that is not prefix-preserving first breaks: shape, messages before, added role\n"
            + "".join(line + "\n" for line in lines))
    check_golden(COUNTS, text)


# ---- TRL's definitions, written out from trl 1.16.0 chat_template_utils.py, run on transformers

def trl_is_chat_template_prefix_preserving(tokenizer, chat_template: str) -> bool:
    dummy_tool_calls = [{"type": "function", "function": {"name": "dummy", "arguments": {}}}]
    messages1 = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "", "tool_calls": dummy_tool_calls}]
    messages2 = [*messages1, {"role": "tool", "name": "dummy", "content": "dummy"}]
    try:
        ids1 = tokenizer.apply_chat_template(messages1, tokenize=True, return_dict=False, chat_template=chat_template)
        ids2 = tokenizer.apply_chat_template(messages2, tokenize=True, return_dict=False, add_generation_prompt=True,
                                             chat_template=chat_template)
    except TypeError:
        dummy_tool_calls = [{"type": "function", "function": {"name": "dummy", "arguments": "{}"}}]
        messages1[1]["tool_calls"] = dummy_tool_calls
        messages2[1]["tool_calls"] = dummy_tool_calls
        ids1 = tokenizer.apply_chat_template(messages1, tokenize=True, return_dict=False, chat_template=chat_template)
        ids2 = tokenizer.apply_chat_template(messages2, tokenize=True, return_dict=False, add_generation_prompt=True,
                                             chat_template=chat_template)
    return ids2[: len(ids1)] == ids1


def trl_is_chat_template_stop_token_trained(tokenizer, chat_template: str) -> bool:
    from jinja2 import TemplateError

    messages = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "dummy"},
                {"role": "user", "content": "dummy"}]
    try:
        output = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True,
                                               return_assistant_tokens_mask=True, chat_template=chat_template)
    except (TemplateError, TypeError, ValueError):
        return False
    added_ids = set(tokenizer.get_added_vocab().values())
    masked_ids = [token_id for token_id, masked in zip(output["input_ids"], output["assistant_masks"]) if masked]
    for token_id in reversed(masked_ids):
        if tokenizer.decode([token_id]).strip() == "":
            continue
        return token_id in added_ids
    return False


def _ours_on_trls_pair(source: str, variables: dict[str, str], tokenizer) -> bool | None:
    tool = PREFIX_SHAPES["tool_call"]
    verdict = extends(source, tool[:2], tool[:3], True, variables, tokenizer)
    if verdict is None:  # TRL's fallback: string arguments
        string = [dict(m) for m in tool[:3]]
        string[1]["tool_calls"] = [{"type": "function", "function": {"name": "dummy", "arguments": "{}"}}]
        verdict = extends(source, string[:2], string[:3], True, variables, tokenizer)
    return verdict


# End-of-turn tokens the test BPE does not hold as added tokens (its vocabulary is the control-token
# shapes of tests/training/conftest.py): TRL's check, run with that BPE, calls them untrained, the
# tokenizer-free definition (text the template writes after the content) sees them inside the span.
_NOT_IN_TEST_VOCABULARY = {"laguna_v2_chat_template.jinja": "</assistant>", "laguna_v8_chat_template.jinja": "</assistant>",
                           "diffusion_gemma_training.jinja": "<turn|>", "deepseekv3_training.jinja": "<｜end▁of▁sentence｜>"}


# TRL's pair is a text prefix on these, but the BPE merges across its end (e.g. "### Response:\n" then "\n"):
# only the measurement with a tokenizer (as TRL, token ids) finds them
_MERGED = ["chujiezheng/solar.jinja", "huggingface.js/Deci_DeciLM-7B-instruct.jinja",
           "jndiogo-LLM-chat-templates/LLaVA_1.6_Vicuna.jinja", "jndiogo-LLM-chat-templates/Moondream2.jinja",
           "llama.cpp/GigaChat3-10B-A1.8B.jinja", "llama.cpp/GigaChat3.1-10B-A1.8B.jinja", "ollama/chatqa__32.jinja",
           "ollama/falcon-instruct__33.jinja", "vllm/template_alpaca.jinja", "vllm/template_fuyu.jinja"]


@pytest.mark.reference
def test_agrees_with_trl_on_every_corpus_template(bpe_folder, corpus_properties) -> None:
    tokenizer = reference_tokenizer(bpe_folder)
    variables = {k: v for k, v in tokenizer.special_tokens_map.items() if isinstance(v, str)}
    added = list(tokenizer.get_added_vocab())
    disagree, text_only, merges = [], [], []
    trl_not_preserving = trl_untrained = 0
    for path in corpus_templates():
        source, where = path.read_text(encoding="utf-8"), _where(path)
        try:
            theirs = trl_is_chat_template_prefix_preserving(tokenizer, source)
        except Exception:  # noqa: BLE001 - TRL raises: the template renders neither pair
            theirs = None
        ours = _ours_on_trls_pair(source, variables, bpe_folder)
        with_tokenizer = measure(source, variables, tokenizer=bpe_folder)
        if theirs is not None:
            trl_not_preserving += not theirs
            if ours != theirs:
                disagree.append(f"{where}: prefix-preserving TRL {theirs}, ours {ours}")
            if not theirs and with_tokenizer.prefix_preserving is not False:
                disagree.append(f"{where}: TRL's pair breaks but the fact says {with_tokenizer.prefix_preserving}")
            if not theirs and corpus_properties[where].prefix_preserving is not False:
                merges.append(where)  # the text-level fact (no tokenizer) cannot see a merge across the boundary
        theirs = trl_is_chat_template_stop_token_trained(tokenizer, source)
        trl_untrained += not theirs
        with_vocabulary = with_tokenizer.stop_token_trained
        if theirs != (with_vocabulary is True):
            disagree.append(f"{where}: stop token trained TRL {theirs}, ours {with_vocabulary}")
        if (corpus_properties[where].stop_token_trained is True) != theirs:
            text_only.append(path.name)
    assert disagree == [], "\n".join(disagree)
    assert sorted(text_only) == sorted(_NOT_IN_TEST_VOCABULARY), text_only
    # each of these is a text prefix whose token ids break: the BPE merges across its end
    assert sorted(merges) == sorted(_MERGED), merges
    assert trl_not_preserving >= 3 and trl_untrained > 300  # the comparison saw both answers


def test_check_compares_token_ids_with_the_folders_tokenizer(bpe_folder, tmp_path) -> None:
    import shutil

    source = (CORPUS / "templates" / _MERGED[-2]).read_text(encoding="utf-8")  # vllm/template_alpaca.jinja
    folder = shutil.copytree(bpe_folder, tmp_path / "model")
    (folder / "chat_template.jinja").write_text(source, encoding="utf-8")
    found = [f for f in check_model(folder).findings if f.code.startswith("TR")]
    assert [f.code for f in found] == ["TR001"] and "changes the tokens before it" in found[0].message
    (folder / "tokenizer.json").unlink()  # text-level without it: the text is a prefix
    assert [f for f in check_model(folder).findings if f.code.startswith("TR")] == []
