"""What a GGUF costs `chatjinja analyze`: wall time and peak RSS against the same template in a `.jinja` file.

    .venv/bin/python benchmarks/bench_gguf.py [--src PATH] [--rounds N] [--tokens N]

Each row runs ``python -m chatjinja analyze FILE`` in a fresh process (``PYTHONPATH=PATH``, default
this checkout's ``src``; pass another checkout's ``src`` to measure it) and reads the child's wall time
and peak RSS (its ``VmHWM``); rounds are interleaved and the medians printed, with the extra cost over
analysing the same template from a ``.jinja`` file, and the median time of ``scan_gguf(FILE)`` alone
in this process (steadier on a busy machine than whole processes). Inputs, written to a temporary directory:

* the four vocabulary files of ``../shared/gguf`` (llama.cpp's ``models/ggml-vocab-*.gguf``); the
  three without a chat template get phi-3's appended as one more key (byte surgery: bump the count,
  add the entry at the end), so every row analyses the same template;
* a generated 150,000-token vocabulary (tokens, scores, types, 150,000 merges) with that template;
* the same plus one 1 GiB tensor (a sparse file: nothing is written to disk but the metadata).
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_GGUF = REPO.parent / "shared" / "gguf"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import table  # noqa: E402 - after the sys.path line

REAL = ["ggml-vocab-bert-bge.gguf", "ggml-vocab-phi-3.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-falcon.gguf"]


# The child reports its own peak RSS (VmHWM of its own address space): ``ru_maxrss`` from wait4 would
# include the parent's RSS at fork time, which Linux carries over into the child.
_CHILD = """
import atexit, os, runpy, sys
def _peak():
    with open("/proc/self/status") as status, open(os.environ["BENCH_GGUF_PEAK"], "w") as out:
        out.write(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
atexit.register(_peak)
sys.argv = ["chatjinja", "analyze", sys.argv[1]]
runpy.run_module("chatjinja", run_name="__main__", alter_sys=True)
"""


def run(src: Path, path: Path, peak_file: Path) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of one ``chatjinja analyze`` process."""
    env = {**os.environ, "PYTHONPATH": str(src), "BENCH_GGUF_PEAK": str(peak_file)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"chatjinja analyze {path} failed: {done.stderr.decode()}")
    return elapsed, int(peak_file.read_text()) / 1024


def with_template(data: bytes, template: bytes) -> bytes:
    """A metadata-only GGUF (little-endian, no tensors) with ``tokenizer.chat_template`` appended."""
    magic, version, tensors, kvs = struct.unpack_from("<4sIQQ", data)
    assert magic == b"GGUF" and tensors == 0
    key = b"tokenizer.chat_template"
    entry = struct.pack("<Q", len(key)) + key + struct.pack("<IQ", 8, len(template)) + template
    return struct.pack("<4sIQQ", magic, version, tensors, kvs + 1) + data[24:] + entry


def generated(path: Path, tokens: int, template: str, tensor_bytes: int = 0) -> Path:
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["<unk>", "<s>", "</s>"] + [f"tok{i}" for i in range(tokens - 3)])
    writer.add_token_scores([0.0] * tokens)
    writer.add_token_types([1] * tokens)
    writer.add_token_merges([f"t{i} k{i}" for i in range(tokens)])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_chat_template(template)
    if tensor_bytes:
        writer.add_tensor_info("weights", [tensor_bytes // 4], np.dtype(np.float32), tensor_bytes)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    if tensor_bytes:
        writer.write_ti_data_to_file()
    writer.close()
    if tensor_bytes:
        size = path.stat().st_size
        with open(path, "r+b") as handle:
            handle.truncate(size + -size % 32 + tensor_bytes)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the chatjinja source tree to measure")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=150_000)
    args = parser.parse_args()
    if not (SHARED_GGUF / "ggml-vocab-phi-3.gguf").is_file():
        raise SystemExit(f"{SHARED_GGUF} not found: this benchmark needs ../shared/gguf beside the checkout")

    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, str(args.src))
        from chatjinja.loading.gguf_file import scan_gguf

        template = scan_gguf(SHARED_GGUF / "ggml-vocab-phi-3.gguf").templates["default"].source
        jinja = Path(tmp) / "phi-3.jinja"
        jinja.write_text(template, encoding="utf-8")
        inputs = {"`.jinja` (the baseline)": jinja}
        for name in REAL:
            data = (SHARED_GGUF / name).read_bytes()
            if name != "ggml-vocab-phi-3.gguf":
                data = with_template(data, template.encode("utf-8"))
            (Path(tmp) / name).write_bytes(data)
            inputs[f"{name} ({len(data) / 1e6:.1f} MB)"] = Path(tmp) / name
        vocab = generated(Path(tmp) / "vocab.gguf", args.tokens, template)
        inputs[f"generated, {args.tokens:,} tokens + merges ({vocab.stat().st_size / 1e6:.1f} MB)"] = vocab
        model = generated(Path(tmp) / "model.gguf", args.tokens, template, tensor_bytes=2**30)
        inputs[f"the same + 1 GiB tensor, sparse ({model.stat().st_size / 1e9:.2f} GB)"] = model

        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in inputs}
        scans: dict[str, list[float]] = {name: [] for name in inputs}
        for _ in range(args.rounds):
            for name, path in inputs.items():
                samples[name].append(run(args.src, path, Path(tmp) / "peak"))
                if path.suffix == ".gguf":
                    started = time.perf_counter()
                    scan_gguf(path)
                    scans[name].append(time.perf_counter() - started)
    medians = {name: (statistics.median(s for s, _ in runs), statistics.median(m for _, m in runs)) for name, runs in samples.items()}
    base_s, base_mb = medians["`.jinja` (the baseline)"]
    rows = [[name, f"{s:.3f}", f"{m:.1f}", f"{s - base_s:+.3f}", f"{m - base_mb:+.1f}",
             f"{statistics.median(scans[name]) * 1e3:.1f}" if scans[name] else ""] for name, (s, m) in medians.items()]
    print(table(["chatjinja analyze", "wall s", "peak RSS MB", "extra s", "extra MB", "scan_gguf ms"], rows))


if __name__ == "__main__":
    main()
