"""Model loading speed: a GGUF's chat template and a model folder's, against the reference readers.

    .venv/bin/python benchmarks/bench_model_loading.py [--tokens N]

Writes, in a temporary directory, a metadata-only GGUF with an N-token vocabulary (default 150,000,
a Qwen/Llama-3 sized one) and the Devstral template, and a model folder with an N-entry WordLevel
``tokenizer.json`` and the same template in ``tokenizer_config.json``. Then times, interleaved:

* GGUF: ``chatjinja.load_template(path)`` vs ``gguf.GGUFReader(path)`` (metadata only, the package the
  ``[gguf]`` extra installs, which chatjinja uses: the ratio shows what finding the template adds);
* folder: ``chatjinja.load_template(folder)`` vs ``transformers.AutoTokenizer.from_pretrained(folder)``
  (offline), the only other way to get the template transformers would use.

Prints median seconds per call and the ratio reference / chatjinja.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from timing import interleaved, ratio, table  # noqa: E402

from chatjinja import load_template  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=150_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import gguf
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import AutoTokenizer

    template = (REPO / "templates" / "devstral-small-2-24b-instruct-2512.jinja").read_text(encoding="utf-8")
    tokens = ["<unk>", "<s>", "</s>"] + [f"tok{i}" for i in range(args.tokens - 3)]
    with tempfile.TemporaryDirectory() as tmp:
        gguf_path = Path(tmp) / "model.gguf"
        writer = gguf.GGUFWriter(str(gguf_path), "llama")
        writer.add_tokenizer_model("gpt2")
        writer.add_token_list(tokens)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_chat_template(template)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.close()

        folder = Path(tmp) / "model"
        folder.mkdir()
        Tokenizer(WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="<unk>")).save(str(folder / "tokenizer.json"))
        (folder / "tokenizer_config.json").write_text(
            json.dumps({"bos_token": "<s>", "eos_token": "</s>", "chat_template": template}), encoding="utf-8"
        )

        assert load_template(gguf_path).source == template and load_template(folder).source == template
        assert AutoTokenizer.from_pretrained(str(folder)).chat_template == template

        rows = []
        timed = interleaved(
            {"chatjinja": lambda: load_template(gguf_path), "gguf.GGUFReader": lambda: gguf.GGUFReader(str(gguf_path), "r")},
            rounds=args.rounds,
            target=0.2,
        )
        rows.append([f"GGUF, {args.tokens:,} tokens ({gguf_path.stat().st_size // 1024} KB)", f"{timed['chatjinja'] * 1e3:.1f}",
                     f"{timed['gguf.GGUFReader'] * 1e3:.1f} (gguf.GGUFReader)", ratio(timed["gguf.GGUFReader"], timed["chatjinja"])])
        timed = interleaved(
            {"chatjinja": lambda: load_template(folder), "AutoTokenizer": lambda: AutoTokenizer.from_pretrained(str(folder))},
            rounds=args.rounds,
            target=0.2,
        )
        size = (folder / "tokenizer.json").stat().st_size // 1024
        rows.append([f"model folder, tokenizer.json {size} KB", f"{timed['chatjinja'] * 1e3:.1f}",
                     f"{timed['AutoTokenizer'] * 1e3:.1f} (AutoTokenizer)", ratio(timed["AutoTokenizer"], timed["chatjinja"])])
    print(table(["input", "chatjinja ms", "reference ms", "reference / chatjinja"], rows))


if __name__ == "__main__":
    main()
