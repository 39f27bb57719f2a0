"""The RP codes: ``check`` reports them on the page's Example and not on Use instead; the page is what ``chatjinja rules`` prints; lint never runs them."""

from __future__ import annotations

import pytest

from chatjinja.cli import main
from chatjinja.lint.registry import all_rules, listed_rules
from chatjinja.release import check_model
from chatjinja.serving.rules import REPLY_RULES
from tests.conftest import REPO
from tests.release.test_folder_rules import folder_files, write

pytest.importorskip("transformers.utils.chat_parsing")


@pytest.mark.parametrize("rule", REPLY_RULES, ids=lambda r: r.code)
def test_example_reports_use_instead_does_not(rule, tmp_path) -> None:
    files = folder_files(rule.section("Example"))
    files["tokenizer_config.json"] = '{"eos_token": "</s>"}'
    check = check_model(write(tmp_path / "bad", files))
    reply = [f for f in check.findings if f.code.startswith("RP")]
    assert [f.code for f in reply] == [rule.code] and "message shape: call_object" in reply[0].message
    files = folder_files(rule.section("Use instead"))
    files["tokenizer_config.json"] = '{"eos_token": "</s>"}'
    check = check_model(write(tmp_path / "good", files))
    assert [f for f in check.findings if f.code.startswith("RP")] == []


@pytest.mark.parametrize("rule", REPLY_RULES, ids=lambda r: r.code)
def test_page_is_the_rules_output(rule, capsys) -> None:
    assert main(["rules", rule.code]) == 0
    assert capsys.readouterr().out == (REPO / "docs" / "rules" / f"{rule.code}.md").read_text(encoding="utf-8")
    assert rule in listed_rules() and rule not in all_rules()
