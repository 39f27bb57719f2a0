"""The tokenizer a GGUF file describes, built as transformers 5.25.0 builds it, without transformers or torch.

A GGUF has no ``tokenizer.json``: llama.cpp stores the vocabulary (``tokenizer.ggml.tokens``, ``scores``,
``token_type``, ``merges``) and the special token ids as metadata. transformers'
``TokenizersBackend.from_pretrained(folder, gguf_file=...)`` reads them with ``get_gguf_tokenizer``,
hands them to ``convert_gguf_tokenizer`` (``integrations/gguf/gguf_tokenizer_mapping.py``), which builds
a ``LlamaTokenizer`` (``tokenizer.ggml.model`` = ``llama``: SentencePiece BPE with byte fallback, merges
recovered from the scores) or a ``GPT2Tokenizer`` (``gpt2``: byte-level BPE with the file's merges),
adds the control tokens as special and the user-defined ones as plain added tokens, and picks the
pre-tokenizer split from ``tokenizer.ggml.pre``; ``TokenizersBackend.__init__`` then adds the named
special tokens and writes the BOS/EOS post-processor. This module does the same steps with the
``tokenizers`` library alone; a differential test compares the result (its JSON, ids and decoding)
with transformers' on llama.cpp's vocabulary files and on files written with ``gguf.GGUFWriter``.

The vocabulary types transformers builds differently (``t5``, ``gemma4``; ``llama`` for a Gemma
architecture) and the ones it cannot build (``bert``, ``rwkv``...) are refused with a
:class:`LoadError` naming the type. The file is untrusted: the counts, the token lengths and the work
of recovering merges are bounded before anything is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import LoadError
from ..loading.gguf_file import GgufMetadata, GgufValue
from .library import tokenizers_module

__all__ = ["GgufTokenizer", "MAX_MERGES", "MAX_TOKEN_BYTES", "MAX_VOCABULARY", "read_gguf_tokenizer"]

#: the most tokens a vocabulary may hold (the largest real ones, Gemma 3's, have 262,144)
MAX_VOCABULARY = 1 << 20
#: the most merges (Llama 3 has 280,147)
MAX_MERGES = 1 << 21
#: the longest token, in UTF-8 bytes (real vocabularies stay under a few hundred)
MAX_TOKEN_BYTES = 1 << 12
#: recovering merges from a vocabulary slices every token at every position: the total of the
#: squared token lengths is bounded (a 262k vocabulary of 16-character tokens is 2**26)
MAX_MERGE_WORK = 1 << 28

# llama.cpp's token types (gguf-py ``TokenType``)
_CONTROL, _USER_DEFINED = 3, 4

# transformers' GGUF_SENTENCEPIECE_BUILDERS: these architectures build a ``llama`` vocabulary their own way
_PHI3 = {"phi3"}
_GEMMA = {"gemma", "gemma2", "gemma3"}

# transformers' GGUF_PRE_TOKENIZER_SPLITS (``tokenizer.ggml.pre`` -> the split regex), verbatim
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TEKKEN_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_GPT4O_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# transformers' qwen2 and qwen3_5 PRETOKENIZE_REGEX
_QWEN2_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
_QWEN35_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
SPLITS: dict[str, str] = {
    **dict.fromkeys(
        ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano",
         "dbrx", "smaug-bpe"),
        _LLAMA3_SPLIT,
    ),
    "tekken": _TEKKEN_SPLIT,
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"), _QWEN2_SPLIT),
    "qwen35": _QWEN35_SPLIT,
    **dict.fromkeys(("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), _GPT4O_SPLIT),
}


class GgufTokenizer:
    """What :func:`read_gguf_tokenizer` gives: the backend, the special-token strings and the BOS/EOS flags."""

    def __init__(self, backend: Any, special_tokens: dict[str, str], add_bos_token: bool, add_eos_token: bool) -> None:
        self.backend = backend
        self.special_tokens = special_tokens
        self.add_bos_token = add_bos_token
        self.add_eos_token = add_eos_token


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (transformers' ``convert_slow_tokenizer.bytes_to_unicode``)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def generate_merges(vocab: dict[str, int], vocab_scores: dict[str, Any]) -> list[tuple[str, str]]:
    """transformers' ``generate_merges(vocab, vocab_scores)``: every split of a token into two vocabulary
    tokens, best score first (ties: shorter left, then shorter right piece)."""
    merges = []
    for merge, piece_score in vocab_scores.items():
        local = []
        for index in range(1, len(merge)):
            piece_l, piece_r = merge[:index], merge[index:]
            if piece_l in vocab and piece_r in vocab:
                local.append((piece_l, piece_r, piece_score))
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda val: (val[2], len(val[0]), len(val[1])), reverse=True)
    return [(left, right) for left, right, _ in merges]


class _Fields:
    """The tokenizer keys of one open GGUF file, each checked for its type and bounds as it is read."""

    def __init__(self, gguf: GgufMetadata, path: Path) -> None:
        self.gguf, self.path, self.values = gguf, path, gguf.values

    def fail(self, detail: str) -> LoadError:
        return LoadError(f"{self.path}: {detail}", source_name=str(self.path))

    def get(self, key: str) -> GgufValue | None:
        return self.values.get(key)

    def string(self, key: str) -> str | None:
        value = self.get(key)
        if value is None:
            return None
        if value.type != "string":
            raise self.fail(f"{key} is {value.describe()}, expected a string")
        if value.count > MAX_TOKEN_BYTES:
            raise self.fail(f"{key} is {value.count} bytes long (at most {MAX_TOKEN_BYTES})")
        return self._text(self.gguf.read(value), key)

    def _text(self, raw: bytes, key: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{key} is not UTF-8 (byte {exc.start})") from None

    def integer(self, key: str) -> int | None:
        value = self.get(key)
        if value is None:
            return None
        if value.type not in ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"):
            raise self.fail(f"{key} is {value.describe()}, expected an integer")
        return int(value.value)

    def flag(self, key: str) -> bool | None:
        value = self.get(key)
        if value is None:
            return None
        if value.type != "bool":
            raise self.fail(f"{key} is {value.describe()}, expected a bool")
        return bool(value.value)

    def strings(self, key: str, limit: int) -> list[str] | None:
        value = self.get(key)
        if value is None:
            return None
        if value.type != "array" or value.element_type != "string":
            raise self.fail(f"{key} is {value.describe()}, expected an array of strings")
        if value.count > limit:
            raise self.fail(f"{key} has {value.count} entries; chatjinja reads at most {limit}")
        items = self.gguf.read(value)
        out = []
        for index, raw in enumerate(items):
            if len(raw) > MAX_TOKEN_BYTES:
                raise self.fail(f"element {index} of {key} is {len(raw)} bytes long (at most {MAX_TOKEN_BYTES})")
            out.append(self._text(raw, f"element {index} of {key}"))
        return out

    def numbers(self, key: str, count: int, kinds: tuple[str, ...]) -> list[Any] | None:
        value = self.get(key)
        if value is None:
            return None
        if value.type != "array" or value.element_type not in kinds:
            raise self.fail(f"{key} is {value.describe()}, expected an array of {' or '.join(kinds)}")
        if value.count > MAX_VOCABULARY:
            raise self.fail(f"{key} has {value.count} entries; chatjinja reads at most {MAX_VOCABULARY}")
        return list(self.gguf.read(value))


def read_gguf_tokenizer(path: str | Path) -> GgufTokenizer:
    """The tokenizer of a GGUF file, as ``TokenizersBackend.from_pretrained(..., gguf_file=path)`` builds it."""
    path = Path(path)
    with GgufMetadata(path) as gguf:
        fields = _Fields(gguf, path)
        architecture = fields.string("general.architecture")
        if architecture is None:
            raise fields.fail("has no general.architecture in its metadata")
        kind = fields.string("tokenizer.ggml.model")
        _check_kind(fields, architecture, kind)
        tokens = fields.strings("tokenizer.ggml.tokens", MAX_VOCABULARY)
        if tokens is None:
            raise fields.fail(f"has tokenizer.ggml.model {kind!r} but no tokenizer.ggml.tokens")
        token_type = fields.numbers("tokenizer.ggml.token_type", len(tokens), ("int32", "uint32", "int8", "uint8", "int16", "uint16", "int64", "uint64"))
        merges = fields.strings("tokenizer.ggml.merges", MAX_MERGES)
        scores = None
        if kind == "llama" and merges is None:
            scores = fields.numbers("tokenizer.ggml.scores", len(tokens), ("float32", "float64"))
            if scores is None:
                raise fields.fail("a llama vocabulary without tokenizer.ggml.merges needs tokenizer.ggml.scores to recover them")
        pre = fields.string("tokenizer.ggml.pre")
        ids = {name: fields.integer(f"tokenizer.ggml.{key}") for name, key in (
            ("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
            ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id"))}
        add_bos = fields.flag("tokenizer.ggml.add_bos_token")
        add_eos = fields.flag("tokenizer.ggml.add_eos_token")
    for name, token_id in ids.items():
        if token_id is not None and not 0 <= token_id < len(tokens):
            raise fields.fail(f"the {name} id {token_id} lies outside tokenizer.ggml.tokens (0..{len(tokens) - 1})")
    special = {name: tokens[token_id] for name, token_id in ids.items() if token_id is not None}
    if kind == "llama" and add_bos is None:
        add_bos = True  # get_gguf_tokenizer: llama.cpp adds BOS to a sentencepiece vocabulary that does not say otherwise

    tokenizers = tokenizers_module()
    parsed = _merge_pairs(fields, merges) if merges is not None else None
    if kind == "llama":
        backend = _sentencepiece(tokenizers, fields, tokens, parsed, scores, phi3=architecture in _PHI3)
    else:
        backend = _byte_level(tokenizers, tokens, parsed or [])
    _add_gguf_special_tokens(tokenizers, backend, tokens, token_type, byte_level=kind == "gpt2")
    split = SPLITS.get(pre) if pre is not None else None
    if split is not None:
        pre_tokenizers = tokenizers.pre_tokenizers
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(tokenizers.Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    return _backend_init(tokenizers, backend, special, bool(add_bos), bool(add_eos))


def _check_kind(fields: _Fields, architecture: str, kind: str | None) -> None:
    """Refuse, in one line naming it, a vocabulary type this module does not build as transformers does."""
    if kind in ("llama", "gpt2"):
        if kind == "llama" and architecture in _GEMMA:
            raise fields.fail(f"a llama vocabulary of architecture {architecture!r} (transformers builds Gemma's its "
                              "own way) is not supported by chatjinja; supported: llama (SentencePiece), gpt2 (BPE)")
        return
    if kind in ("t5", "gemma4"):
        raise fields.fail(f"tokenizer.ggml.model {kind!r} is not supported by chatjinja (transformers converts it; "
                          "chatjinja builds llama (SentencePiece) and gpt2 (BPE) vocabularies)")
    raise fields.fail(f"tokenizer.ggml.model {kind!r} cannot be converted (transformers builds llama, gpt2, t5 and "
                      "gemma4 vocabularies; chatjinja llama and gpt2)")


def _merge_pairs(fields: _Fields, merges: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for index, merge in enumerate(merges):
        parts = tuple(merge.split(" "))
        if len(parts) != 2:
            raise fields.fail(f"element {index} of tokenizer.ggml.merges is {merge!r}, not two tokens joined by one space")
        pairs.append(parts)
    return pairs


def _sentencepiece(tokenizers: Any, fields: _Fields, tokens: list[str], merges: list[tuple[str, str]] | None,
                   scores: list[Any] | None, *, phi3: bool) -> Any:
    """``LlamaTokenizer(vocab=..., merges=...)`` (``phi3_tokenizer`` for Phi-3), before ``convert_gguf_tokenizer``'s additions."""
    vocab = {token: index for index, token in enumerate(tokens)}
    if merges is None:
        assert scores is not None
        if len(scores) != len(tokens):
            raise fields.fail(f"tokenizer.ggml.scores has {len(scores)} entries for {len(tokens)} tokens")
        work = sum(len(token) ** 2 for token in tokens)
        if work > MAX_MERGE_WORK:
            raise fields.fail(f"recovering the merges of this vocabulary would slice {work} characters (at most {MAX_MERGE_WORK})")
        merges = generate_merges(vocab, dict(zip(tokens, scores)))
    backend = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=merges, fuse_unk=True, byte_fallback=True, dropout=None))
    decoders = tokenizers.decoders
    backend.normalizer = None
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(content=" ", left=1)])
    # LlamaTokenizer's own special tokens (bos, eos, unk, in transformers' attribute order) are added as in TokenizersBackend.__init__
    backend.add_tokens([tokenizers.AddedToken(content, special=True) for content in ("<s>", "</s>", "<unk>")])
    if phi3:
        normalizers = tokenizers.normalizers
        backend.normalizer = normalizers.Sequence([normalizers.Prepend(prepend="▁"), normalizers.Replace(pattern=" ", content="▁")])
        backend.pre_tokenizer = None
    return backend


def _byte_level(tokenizers: Any, tokens: list[str], merges: list[tuple[str, str]]) -> Any:
    """``GPT2Tokenizer(vocab=..., merges=...)`` with the vocabulary spelled in GPT-2's byte alphabet (``byte_level_tokenizer``)."""
    spelling = bytes_to_unicode()
    alphabet = set(spelling.values())
    vocab = {
        token if set(token) <= alphabet else "".join(spelling[byte] for byte in token.encode("utf-8")): index
        for index, token in enumerate(tokens)
    }
    backend = tokenizers.Tokenizer(tokenizers.models.BPE(
        vocab=vocab, merges=merges, dropout=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = tokenizers.decoders.ByteLevel()
    backend.add_tokens([tokenizers.AddedToken("<|endoftext|>", special=True)])  # GPT2Tokenizer's bos, eos and unk
    return backend


def _add_gguf_special_tokens(tokenizers: Any, backend: Any, tokens: list[str], token_type: list[Any] | None, *, byte_level: bool) -> None:
    """``add_gguf_special_tokens``: control tokens as special, user-defined ones (in the vocabulary) as plain added tokens."""
    types = token_type or ()
    spelled = set(bytes_to_unicode().values()) if byte_level else None
    control = [
        tokenizers.AddedToken(token, normalized=False, special=True)
        for token, kind in zip(tokens, types)
        if kind == _CONTROL and (spelled is None or set(token) <= spelled)
    ]
    if control:
        backend.add_special_tokens(control)
    vocab = backend.get_vocab(with_added_tokens=True)
    user_defined = [
        tokenizers.AddedToken(token, normalized=False, special=False)
        for token, kind in zip(tokens, types)
        if kind == _USER_DEFINED and token in vocab
    ]
    if user_defined:
        backend.add_tokens(user_defined)


def _backend_init(tokenizers: Any, backend: Any, special: dict[str, str], add_bos: bool, add_eos: bool) -> GgufTokenizer:
    """``TokenizersBackend.__init__`` with the GGUF's tokenizer config: the named special tokens it lacks are
    added, then ``update_post_processor`` writes BOS/EOS."""
    present = {token.content for token in backend.get_added_tokens_decoder().values()}
    missing = []
    for name in ("bos_token", "eos_token", "unk_token", "pad_token"):
        content = special.get(name)
        if content is not None and content not in present and content not in missing:
            missing.append(content)
    if missing:
        backend.add_tokens([tokenizers.AddedToken(content, special=True) for content in missing])
    # (a named token already added stays as it is: a user-defined EOS is not special, as in transformers)
    bos, eos = special.get("bos_token"), special.get("eos_token")
    add_bos = add_bos and bos is not None
    add_eos = add_eos and eos is not None
    single = f"{(bos + ':0 ') if add_bos else ''}$A:0{(' ' + eos + ':0') if add_eos else ''}"
    pair = f"{single}{(' ' + bos + ':1') if add_bos else ''} $B:1{(' ' + eos + ':1') if add_eos else ''}"
    pieces = []
    if add_bos:
        pieces.append((bos, backend.token_to_id(bos)))
    if add_eos:
        pieces.append((eos, backend.token_to_id(eos)))
    backend.post_processor = tokenizers.processors.TemplateProcessing(single=single, pair=pair, special_tokens=pieces)
    backend.no_truncation()
    backend.no_padding()
    backend.encode_special_tokens = False
    return GgufTokenizer(backend, special, add_bos, add_eos)
