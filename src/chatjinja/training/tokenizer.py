"""A ``tokenizers.Tokenizer`` with the settings transformers 5.25.0's ``TokenizersBackend`` reads from a model folder."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LoadError
from ..loading.folder import read_json_file, read_text_file
from ..loading.gguf_file import is_gguf_file
from ..loading.paths import SPECIAL_TOKENS_MAP_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE
from ..loading.special_tokens import special_tokens_map
from .gguf_tokenizer import read_gguf_tokenizer
from .library import tokenizers_module
from .segments import segment_encoder

__all__ = ["ChatTokenizer", "VERY_LARGE_INTEGER", "LARGE_INTEGER", "load_tokenizer"]

#: transformers' ``model_max_length`` when the config gives none, and the bound above which it means "no limit"
VERY_LARGE_INTEGER = int(1e30)
LARGE_INTEGER = int(1e20)



@dataclass
class ChatTokenizer:
    """The tokenizer half of ``apply_chat_template(..., tokenize=True)``.

    ``backend`` is the ``tokenizers.Tokenizer`` (its padding and truncation are set for each call,
    as transformers sets them); the other fields are the ``PreTrainedTokenizerBase`` attributes the
    tokenizing path reads. ``special_tokens`` is the map passed to templates (``bos_token``, ...).
    ``path`` is where it was loaded from (``None`` for an object): a worker process reloads it from there.
    """

    backend: Any
    special_tokens: dict[str, str] = field(default_factory=dict)
    pad_token: str | None = None
    unk_token: str | None = None
    padding_side: str = "right"
    truncation_side: str = "right"
    model_max_length: int = VERY_LARGE_INTEGER
    split_special_tokens: bool = False
    model_input_names: tuple[str, ...] = ("input_ids", "attention_mask")
    chat_control_tokens: tuple[str, ...] | None = None
    pad_token_type_id: int = 0
    path: str | None = None
    #: serialises calls: the backend's padding and truncation are per-call state
    lock: Any = field(default_factory=threading.Lock, repr=False, compare=False)
    #: the piece-by-piece cached encoder (``segments.SegmentEncoder``), ``False`` when the backend has none
    segments: Any = field(default=None, repr=False, compare=False)

    def segment_encoder(self) -> Any:
        """The backend's ``SegmentEncoder`` (built on first use), or ``None`` when its pipeline needs the plain encode."""
        if self.segments is None:
            self.segments = segment_encoder(self.backend) or False
        return self.segments or None

    def token_to_id(self, token: str | None) -> int | None:
        """``convert_tokens_to_ids``: the id, else the unknown token's id (``None`` when there is none)."""
        if token is None:
            return None
        index = self.backend.token_to_id(token)
        if index is None and self.unk_token is not None:
            return self.backend.token_to_id(self.unk_token)
        return index

    @property
    def pad_token_id(self) -> int | None:
        return self.token_to_id(self.pad_token)

    def added_tokens(self) -> list[Any]:
        """The backend's added tokens (``AddedToken``), in id order: ``tokenizer.added_tokens_decoder.values()``."""
        decoder = self.backend.get_added_tokens_decoder()
        return [decoder[index] for index in sorted(decoder)]

    def __getstate__(self) -> dict[str, Any]:
        if self.path is not None:  # reloaded (once per process) from where it came from
            return {"path": self.path}
        state = dict(self.__dict__)
        state["backend"] = self.backend.to_str()
        state.pop("lock")
        state["segments"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if set(state) == {"path"}:
            self.__dict__.update(load_tokenizer(state["path"]).__dict__)
            return
        state = dict(state)
        state["backend"] = tokenizers_module().Tokenizer.from_str(state["backend"])
        state["lock"] = threading.Lock()
        self.__dict__.update(state)


def _backend_sides(backend: Any) -> tuple[str | None, str | None, str | None]:
    """What ``TokenizersBackend.__init__`` takes from ``tokenizer.json``'s own padding and truncation."""
    padding = backend.padding
    truncation = backend.truncation
    return (
        padding.get("pad_token") if padding else None,
        padding.get("direction") if padding else None,
        truncation.get("direction") if truncation else None,
    )


def _side(value: Any, what: str, where: str) -> str:
    if value not in ("right", "left"):
        # transformers: "Padding side should be selected between 'right' and 'left', current value: ..."
        raise LoadError(f"{where}: {what} should be selected between 'right' and 'left', current value: {value}", source_name=where)
    return value


def _from_backend(backend: Any, path: str | None) -> ChatTokenizer:
    pad_token, padding_side, truncation_side = _backend_sides(backend)
    return ChatTokenizer(
        backend=backend,
        special_tokens={"pad_token": pad_token} if pad_token is not None else {},
        pad_token=pad_token,
        padding_side=padding_side or "right",
        truncation_side=truncation_side or "right",
        path=path,
    )


def _token_content(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _added_token(tokenizers: Any, value: dict[str, Any], special_default: bool) -> Any:
    return tokenizers.AddedToken(
        value["content"],
        single_word=bool(value.get("single_word", False)),
        lstrip=bool(value.get("lstrip", False)),
        rstrip=bool(value.get("rstrip", False)),
        normalized=bool(value.get("normalized", not special_default)),
        special=bool(value.get("special", special_default)),
    )


def _from_folder(folder: Path) -> ChatTokenizer:
    tokenizers = tokenizers_module()
    tokenizer_file = folder / TOKENIZER_FILE
    if not tokenizer_file.is_file():
        raise LoadError(f"{folder} has no {TOKENIZER_FILE}: chatjinja tokenizes with a tokenizers file only", source_name=str(folder))
    backend = _read_backend(tokenizer_file)
    config_file = folder / TOKENIZER_CONFIG_FILE
    config = read_json_file(config_file) if config_file.is_file() else {}
    map_file = folder / SPECIAL_TOKENS_MAP_FILE
    tokens_map = read_json_file(map_file) if map_file.is_file() else None
    json_pad, json_padding_side, json_truncation_side = _backend_sides(backend)
    special = special_tokens_map(
        config, str(config_file), tokens_map, str(map_file), {"padding": {"pad_token": json_pad}} if json_pad else None
    )
    where = str(config_file)

    # TokenizersBackend.__init__: the config's added tokens the file lacks, then every named or extra
    # special token still missing, are added (named ones as special)
    present = {token.content for token in backend.get_added_tokens_decoder().values()}
    to_add: list[Any] = []
    decoder = config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        for _, value in sorted(decoder.items(), key=lambda item: int(item[0]) if str(item[0]).isdigit() else 0):
            if isinstance(value, dict) and isinstance(value.get("content"), str) and value["content"] not in present:
                to_add.append(_added_token(tokenizers, value, True))
                present.add(value["content"])
    named = {value for value in special.values()}
    extra = config.get("extra_special_tokens", config.get("additional_special_tokens"))
    extra_tokens = [content for content in (_token_content(item) for item in extra)] if isinstance(extra, list) else []
    for content in [*special.values(), *extra_tokens]:
        if content is not None and content not in present:
            to_add.append(tokenizers.AddedToken(content, special=True, normalized=False))
            present.add(content)
    for token in to_add:
        if not token.special and token.content in named:
            token.special = True
    if to_add:
        backend.add_tokens(to_add)

    model_max_length = config.get("model_max_length", config.get("max_len"))
    input_names = config.get("model_input_names")
    control = config.get("chat_control_tokens")
    if control is not None and not isinstance(control, (list, tuple)):
        raise LoadError(f"{where}: `chat_control_tokens` should be a list of strings, got {control!r}", source_name=where)
    return ChatTokenizer(
        backend=backend,
        special_tokens=special,
        pad_token=special.get("pad_token"),
        unk_token=special.get("unk_token"),
        padding_side=_side(config.get("padding_side", json_padding_side or "right"), "Padding side", where),
        truncation_side=_side(config.get("truncation_side", json_truncation_side or "right"), "Truncation side", where),
        model_max_length=int(model_max_length) if model_max_length is not None else VERY_LARGE_INTEGER,
        split_special_tokens=bool(config.get("split_special_tokens", False)),
        model_input_names=tuple(input_names) if isinstance(input_names, list) and input_names else ("input_ids", "attention_mask"),
        chat_control_tokens=tuple(control) if control is not None else None,
        path=str(folder),
    )


def _from_gguf(path: Path) -> ChatTokenizer:
    """The tokenizer a GGUF file describes (:mod:`chatjinja.training.gguf_tokenizer`), with its special tokens."""
    built = read_gguf_tokenizer(path)
    return ChatTokenizer(
        backend=built.backend,
        special_tokens=dict(built.special_tokens),
        pad_token=built.special_tokens.get("pad_token"),
        unk_token=built.special_tokens.get("unk_token"),
        path=str(path),
    )


def _read_backend(path: Path) -> Any:
    """``tokenizer.json``, read under the loaders' input cap (:func:`chatjinja.files.input_limit`)."""
    tokenizers = tokenizers_module()
    text = read_text_file(path)
    try:
        return tokenizers.Tokenizer.from_str(text)
    except Exception as exc:  # the Rust side raises a bare Exception with serde's message
        raise LoadError(f"{path} is not a tokenizers file: {exc}", source_name=str(path)) from None


#: the files of a model folder whose changes reload its tokenizer (the legacy ``special_tokens_map.json``
#: is read but not watched)
_FOLDER_FILES = ("tokenizer.json", "tokenizer_config.json")
#: how long a path's files are trusted after their last check: the ``os.stat`` of each costs some
#: microseconds, a tenth of a tokenized call, so a path is checked at most once a second
RECHECK_SECONDS = 1.0
_clock = time.monotonic  # (a test replaces it)
# a path as given -> [the stamp of its files, the tokenizer loaded from them, when the stamp was taken]
_CACHE: dict[str, list] = {}
_CACHE_SIZE = 8
_CACHE_LOCK = threading.Lock()


def _stamp(path: str) -> tuple | None:
    """``(mtime_ns, size)`` of each watched file of a folder (``None`` for one it lacks), or of the file ``path``; ``None`` when nothing is there."""
    files = [os.path.join(path, name) for name in _FOLDER_FILES]
    try:
        found = os.stat(files[0])  # a folder (the common case), else a file
    except OSError:
        try:
            found = os.stat(path)
        except OSError:
            return None
        return ("file", found.st_mtime_ns, found.st_size)
    stamp: list[Any] = ["folder", found.st_mtime_ns, found.st_size]
    for name in files[1:]:
        try:
            other = os.stat(name)
        except OSError:
            stamp.append(None)
        else:
            stamp += [other.st_mtime_ns, other.st_size]
    return tuple(stamp)


def load_tokenizer(tokenizer: Any) -> ChatTokenizer:
    """A ``ChatTokenizer`` from a ``tokenizers.Tokenizer``, a ``tokenizer.json`` path, a GGUF file or a model folder.

    A GGUF file (a ``.gguf`` name or the GGUF magic) gives the tokenizer its metadata describes, built as
    transformers' ``gguf_file=`` loading builds it (:mod:`chatjinja.training.gguf_tokenizer`).
    A path is loaded once per process, and again when its file or (for a folder) its ``tokenizer.json`` or
    ``tokenizer_config.json`` changes: an ``os.stat`` of each checks that, at most once every
    :data:`RECHECK_SECONDS` per path; a ``ChatTokenizer`` is itself.
    """
    if isinstance(tokenizer, ChatTokenizer):
        return tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        key = tokenizer if type(tokenizer) is str else os.fspath(tokenizer)
        cached = _CACHE.get(key)
        now = _clock()
        if cached is not None and now - cached[2] < RECHECK_SECONDS:
            return cached[1]
        stamp = _stamp(key)
        if cached is not None and cached[0] == stamp:
            cached[2] = now
            return cached[1]
        path = Path(key)
        if stamp is None:
            raise LoadError(f"tokenizer {key!r} does not exist (give a tokenizer.json file or a model folder)", source_name=key)
        if path.is_dir():
            loaded = _from_folder(path)
        elif is_gguf_file(path):
            loaded = _from_gguf(path)
        else:
            loaded = _from_backend(_read_backend(path), key)
        with _CACHE_LOCK:
            _CACHE.pop(key, None)
            _CACHE[key] = [stamp, loaded, now]
            while len(_CACHE) > _CACHE_SIZE:  # the oldest goes: a process tokenizes with a few tokenizers at most
                del _CACHE[next(iter(_CACHE))]
        return loaded
    tokenizers = tokenizers_module()
    if isinstance(tokenizer, tokenizers.Tokenizer):
        # TokenizersBackend(tokenizer_object=...) works on a deep copy: the caller's padding stays theirs
        return _from_backend(tokenizers.Tokenizer.from_str(tokenizer.to_str()), None)
    raise TypeError(
        "tokenizer must be a tokenizers.Tokenizer, a tokenizer.json path, a GGUF file or a model folder, got "
        f"{type(tokenizer).__name__}"
    )
