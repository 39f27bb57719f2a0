"""Hypothesis mutation test: broken corpus templates are rejected exactly when jinja2 rejects them."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatjinja.errors import TemplateSyntaxError
from chatjinja.syntax import parse
from tests.syntax.support import corpus_sources

EXAMPLES = 2000
REQUIRED_AGREEMENT = 0.995

# snippets inserted into tags: delimiters, quotes, end tags, operators, keywords, odd characters
INSERTS = [
    "{%", "%}", "{{", "}}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "'", '"', "\\", "\\x",
    "{% endif %}", "{% endfor %}", "{% else %}", "{% elif x %}", "{% endmacro %}", "{% endset %}",
    "{% raw %}", "{% endraw %}", "{% generation %}", "{% endgeneration %}", "{% do x %}",
    "-", "+", "|", "(", ")", "[", "]", "{", "}", ",", ":", ".", "~", "*", "**", "=", "==", "!",
    ";", "/", "//", "%", "#", "<", ">=", "not ", " in ", " is ", " if ", " else ", " and ", " or ",
    " recursive", " as ", "true", "none", "loop", "x", "0", "1.5", "1_", "0x", "e5", "_",
    "set ", "for ", "with ", "import ", "endfor", "endif", "\t", "\n", "é", "\u0301",
]  # fmt: skip
# structural pieces deleted or duplicated where they occur
PIECES = [
    "{%", "%}", "{{", "}}", "'", '"', "(", ")", "[", "]", "{% endif %}", "{% endfor %}",
    "{%- endif %}", "{%- endfor %}", "{% else %}", "|", ",", ":", ".", " if ", " else ", " in ",
    " not ", " is ", "-", "=",
]  # fmt: skip
_TAG = re.compile(r"\{[{%#].*?[}%#]\}", re.S)

_TEMPLATES = [text for _, text in corpus_sources()]


def _mutate(text: str, ops: list[tuple[int, int, int, int]]) -> str:
    """Apply (kind, where, what, length) operations, each aimed inside some tag of the text."""
    for kind, where, what, length in ops:
        tags = [m.span() for m in _TAG.finditer(text)] or [(0, len(text))]
        start, end = tags[where % len(tags)]
        pos = start + (what % (end - start + 1))
        if kind == 0:  # delete 1-5 characters
            text = text[:pos] + text[pos + length :]
        elif kind in (1, 2):  # delete or duplicate one occurrence of a structural piece
            piece = PIECES[what % len(PIECES)]
            found = [m.start() for m in re.finditer(re.escape(piece), text)]
            if found:
                at = found[where % len(found)]
                text = text[:at] + text[at + len(piece) :] if kind == 1 else text[:at] + piece + text[at:]
        elif kind == 3:  # insert a snippet
            text = text[:pos] + INSERTS[length * 7 % len(INSERTS)] + text[pos:]
        else:  # replace one character
            text = text[:pos] + INSERTS[length * 11 % len(INSERTS)][:1] + text[pos + 1 :]
    return text


_operation = st.tuples(
    st.integers(0, 4), st.integers(0, 10_000), st.integers(0, 10_000), st.integers(1, 5 * len(INSERTS))
)


@pytest.mark.corpus
@pytest.mark.skipif(not _TEMPLATES, reason="../shared/corpus not found: mutants are made from its templates")
def test_mutants_agree_with_jinja2(jinja2_accepts):
    outcomes: list[tuple[str, bool, bool, str]] = []

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.integers(0, len(_TEMPLATES) - 1), st.lists(_operation, min_size=1, max_size=3))
    def run(index: int, ops: list) -> None:
        mutant = _mutate(_TEMPLATES[index], ops)
        expected, why = jinja2_accepts(mutant)
        try:
            parse(mutant)
            got = True
        except TemplateSyntaxError:
            got = False
        outcomes.append((mutant, expected, got, why))

    run()
    disagreements = [o for o in outcomes if o[1] != o[2]]
    rejected = sum(1 for o in outcomes if not o[1])
    agreement = 1 - len(disagreements) / len(outcomes)
    print(f"{len(outcomes)} mutants, {rejected} rejected by jinja2, agreement {agreement:.4%}")
    assert rejected > len(outcomes) // 4, "mutants too gentle to test anything"
    details = "\n".join(
        f"jinja2 {'accepts' if e else 'rejects (' + w + ')'}: {m[:300]!r}" for m, e, _, w in disagreements[:5]
    )
    assert agreement >= REQUIRED_AGREEMENT, details
