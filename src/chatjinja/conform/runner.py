"""``conform``: render each case with the template and with mistral-common, and classify every case."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..loading import TemplateRecord, load_template
from .compare import Difference, first_difference
from .explain import explain_case, render_case
from .reference import Reference, has_images, load_reference
from .report import CaseResult, ConformanceReport
from .suite import ConversationCase, builtin_suite, cases_from_json

__all__ = ["conform"]


def _as_template(template: TemplateRecord | str) -> TemplateRecord:
    return template if isinstance(template, TemplateRecord) else load_template(template)


def compare_case(template: TemplateRecord, reference: Reference, case: ConversationCase) -> CaseResult:
    text, error = render_case(template, case.copy_messages(), case.copy_tools())
    outcome = reference.encode(case.copy_messages(), case.copy_tools())
    result = CaseResult(
        name=case.name,
        status="match",
        template_text=text,
        reference_text=outcome.text,
        template_error=error,
        reference_error=outcome.rejected,
        notes=list(outcome.notes),
    )
    if error is not None and outcome.rejected is not None:
        result.status = "both-rejected"
        return result
    if error is not None:
        result.status = "template-error"
        return result
    if outcome.rejected is not None:
        result.status = "reference-rejected"
        return result
    assert text is not None and outcome.text is not None
    images = has_images(case.messages)
    tokens = reference.tokenize(text, images=images) if outcome.tokens is not None else None
    result.level = "tokens" if tokens is not None else "text"
    if outcome.tokens is not None and tokens is None:
        result.notes.append("the template's text cannot be tokenized the way mistral-common does (a SentencePiece "
                            "segment without its prefix space), so it was compared as text")
    result.difference = first_difference(text, outcome.text)
    if result.difference is None and tokens is not None and tokens != outcome.tokens:
        index = next((i for i, (x, y) in enumerate(zip(tokens, outcome.tokens)) if x != y), min(len(tokens), len(outcome.tokens)))
        pieces_t = reference.token_pieces(tokens[index : index + 1], images=images)
        pieces_r = reference.token_pieces(outcome.tokens[index : index + 1], images=images)
        result.difference = Difference.at_token(index, next(iter(pieces_t), None), next(iter(pieces_r), None))
    if result.difference is not None:
        result.status = "mismatch"
    return result


def conform(
    template: TemplateRecord | str,
    against: str = "v3",
    conversations: Any = None,
    *,
    form: str = "auto",
    explain: bool = True,
) -> ConformanceReport:
    """Compare ``template`` with mistral-common's own output for tokenizer version ``against``.

    ``template``: a :class:`TemplateRecord` or anything :func:`chatjinja.load_template` accepts.
    ``against``: ``"v3"``, ``"v3-tekken"``, ``"mistral-common:v13"``, ... ``conversations``: ``None``
    for the built-in suite, a list of :class:`ConversationCase`, JSON data (see
    :func:`cases_from_json`) or the path of a JSON file holding it. ``form``: ``auto`` (tokenizer
    for v1–v7, generated template for v11+), ``tokenizer`` or ``template``. Raises
    :class:`ReferenceUnavailable` without mistral-common.
    """
    reference = load_reference(against, form=form)
    chat_template = _as_template(template)
    if conversations is None:
        cases = builtin_suite(images=reference.supports_images)
    elif isinstance(conversations, list) and all(isinstance(c, ConversationCase) for c in conversations):
        cases = list(conversations)
    elif isinstance(conversations, (str, os.PathLike)):
        path = Path(conversations)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read conversations from {path}: {exc}") from None
        cases = cases_from_json(data, source=str(path))
    else:
        cases = cases_from_json(conversations)
    results = []
    for case in cases:
        result = compare_case(chat_template, reference, case)
        if explain and not result.agrees:
            explained = explain_case(chat_template, reference, case, result)
            result.cause_codes = [code for code, _ in explained]
            result.causes = [cause for _, cause in explained]
        results.append(result)
    return ConformanceReport(
        template=chat_template.name,
        version=reference.version,
        form=reference.form,
        reference=reference.description,
        cases=results,
    )
