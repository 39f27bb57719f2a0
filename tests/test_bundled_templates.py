"""The documented templates: byte-identical to the seed documents, the manifest, and name lookup."""

from __future__ import annotations

import pytest

from chatjinja import TemplateNotFound, load_template
from chatjinja.loading import bundled_manifest, bundled_templates_dir
from tests.conftest import SEEDS

DEVSTRAL_SEED = "000_53c421375a0c08c7.txt"
MISTRAL_SEED = "001_b820fbeeaa9c68ff.txt"


def _seed(name: str) -> str:
    path = SEEDS / name
    if not path.is_file():
        pytest.skip(f"seed document {path} not found: these tests need ../shared/seeds beside the checkout")
    return path.read_text(encoding="utf-8")


def _seed_spans() -> dict[str, str]:
    """The template spans exactly as the issue defines them, cut from the seed documents."""
    devstral = _seed(DEVSTRAL_SEED)
    start = devstral.index("\nChat template\n") + len("\nChat template\n")
    end = devstral.rindex("{%- endfor %}") + len("{%- endfor %}")
    spans = {"devstral-small-2-24b-instruct-2512": devstral[start:end].lstrip("\n")}
    mistral = _seed(MISTRAL_SEED)
    pos = 0
    for name in ("mistral-v1", "mistral-v2-v3", "mistral-v3-tekken"):
        start = mistral.index("Jinja Template:\n", pos) + len("Jinja Template:\n")
        end = mistral.index("Encoding Code Sample:", start)
        spans[name] = mistral[start:end].strip("\n")
        pos = end
    return spans


@pytest.mark.parametrize("name", ["devstral-small-2-24b-instruct-2512", "mistral-v1", "mistral-v2-v3", "mistral-v3-tekken"])
def test_template_file_is_byte_identical_to_seed_span(name):
    spans = _seed_spans()
    data = (bundled_templates_dir() / f"{name}.jinja").read_bytes()
    assert data == spans[name].encode("utf-8")
    assert not data.endswith(b"\n")
    assert data.startswith(b"{")


def test_seed_spans_start_and_end_where_the_documents_say():
    spans = _seed_spans()
    assert spans["devstral-small-2-24b-instruct-2512"].startswith("{#- Default system message")
    for name in ("mistral-v1", "mistral-v2-v3", "mistral-v3-tekken"):
        assert spans[name].startswith("{{ bos_token }}\n{% for message in messages %}")
        assert spans[name].endswith("{% endfor %}")


def test_manifest_records_the_documents_facts():
    entries = {e["name"]: e for e in bundled_manifest()["templates"]}
    mistral = _seed(MISTRAL_SEED)
    for name in ("mistral-v1", "mistral-v2-v3", "mistral-v3-tekken"):
        assert entries[name]["basic_string"] in mistral
        for model in entries[name]["models"]:
            assert model in mistral
        assert entries[name]["special_tokens"] == {"bos_token": "<s>", "eos_token": "</s>"}
    assert entries["mistral-v1"]["tokenizer_family"] == "sentencepiece"
    assert entries["mistral-v3-tekken"]["tokenizer_family"] == "tiktoken"
    devstral = entries["devstral-small-2-24b-instruct-2512"]
    seed = _seed(DEVSTRAL_SEED)
    assert devstral["sampling_defaults"] == {"temperature": 0.15} and "0.15" in seed
    assert devstral["stop_strings"] == [] and seed.rstrip().endswith("Stop strings")


@pytest.mark.parametrize(
    "query, expected",
    [
        ("mistral-v1", "mistral-v1"),
        ("MISTRAL-V1", "mistral-v1"),
        ("Mistral-7B-Instruct-v0.1", "mistral-v1"),
        ("mistralai/Mistral-7B-Instruct-v0.1", "mistral-v1"),
        ("mistralai/mixtral-8x22b-instruct-v0.1", "mistral-v2-v3"),
        ("Mistral Small 22B Instruct 2407", "mistral-v2-v3"),
        ("mistralai/Mistral-Nemo-Instruct-2407".replace("Nemo-Instruct", "Nemo-12B-Instruct"), "mistral-v3-tekken"),
        ("Pixtral-12B-2409", "mistral-v3-tekken"),
        ("mistralai/Devstral-Small-2-24B-Instruct-2512", "devstral-small-2-24b-instruct-2512"),
    ],
)
def test_load_template_by_name_or_model(query, expected):
    template = load_template(query)
    assert template.name == expected
    assert template.special_tokens == {"bos_token": "<s>", "eos_token": "</s>"}


def test_unknown_name_raises_template_not_found():
    with pytest.raises(TemplateNotFound, match="no template file, bundled template or model named 'gpt-17'"):
        load_template("gpt-17")


def test_verbatim_mistral_templates_render_the_documented_extra_whitespace():
    v1 = load_template("mistral-v1")
    text = v1.render(bundled_manifest()["example_conversation"])
    assert text.startswith("<s>\n         [INST] Hello, how are you? [/INST]")
    assert text != v1.metadata["basic_string"]
    # ...and differs from the Basic String only by whitespace
    assert "".join(text.split()) == "".join(v1.metadata["basic_string"].split())
