"""Batch rendering: many conversations through one template, in worker processes, results in input order.

One function does the work for every path, :func:`render_line` (a JSON line in, a JSON line out:
``{"text": ...}`` or ``{"error": "..."}``); :func:`render_batch` (Python objects),
:func:`render_jsonl` (files, the CLI's ``render --batch``) and :func:`render_jsonl_dask` (a Dask
cluster) only decide where it runs. Worker processes get the template once, in their initializer,
and take chunks of records; each compiles the template once (the in-memory cache, or the disk
cache when it is warm).

A file batch loses nothing: input line *i* gives output line *i*, a text or an error record that
names the line (``{"error": "...", "line": i}``) for malformed JSON, a wrong shape, a line over the
input cap, a render error or a budget; the output file is written (atomically) whatever the lines
hold, and is always valid UTF-8 (:func:`chatjinja.files.json_text`).
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections import deque
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

from ..errors import ChatJinjaError
from ..files import DEFAULT_MAX_INPUT_BYTES, FileError, atomic_text_file, json_text
from ..template import chat_template_argument

__all__ = [
    "BatchSummary",
    "RenderBatchError",
    "RenderFailure",
    "render_batch",
    "render_jsonl",
    "render_jsonl_dask",
    "render_line",
    "render_lines",
    "render_record",
    "split_record",
]

# Records per task sent to a worker: big enough that pickling and scheduling are noise next to
# rendering, small enough that the progress bar moves and the last chunk does not leave a worker idle.
_MAX_CHUNK = 256


class RenderBatchError(ChatJinjaError):
    """A conversation of a batch failed to render (``errors="raise"``); ``index`` says which."""

    def __init__(self, index: int, message: str):
        super().__init__(f"conversation {index}: {message}")
        self.index = index


@dataclass(frozen=True)
class RenderFailure:
    """In place of a text (``errors="return"``): which conversation failed and the one-line error."""

    index: int
    error: str


@dataclass(frozen=True)
class BatchSummary:
    """What a file batch did: records rendered, failed (and the first failing input line), and how fast."""

    ok: int
    errors: int
    seconds: float
    workers: int
    first_error_line: int | None = None

    @property
    def total(self) -> int:
        return self.ok + self.errors

    @property
    def rate(self) -> float:
        return self.total / self.seconds if self.seconds > 0 else float("inf")

    def line(self) -> str:
        first = f" (first on line {self.first_error_line})" if self.first_error_line is not None else ""
        return (
            f"rendered {self.total} conversations: {self.ok} ok, {self.errors} errors{first}, "
            f"{self.rate:.0f}/s ({self.seconds:.2f} s, {self.workers} worker{'s' if self.workers != 1 else ''})"
        )


def _error_text(exc: BaseException) -> str:
    """One line: the exception class and the first line of its message (and the template line, if known)."""
    text = str(exc).strip()
    message = text.splitlines()[0] if text else ""
    line = getattr(exc, "lineno", None)
    where = f" (template line {line})" if isinstance(line, int) and f"line {line}" not in message else ""
    return f"{type(exc).__name__}: {message}{where}" if message else f"{type(exc).__name__}{where}"


def split_record(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """An input object's keys other than ``messages`` -> (render parameters, template variables).

    ``tools``, ``documents``, ``add_generation_prompt``, ``continue_final_message`` and
    ``chat_template`` are those parameters, as in transformers' ``apply_chat_template``; every other
    key, whatever its name (``budgets``, ``strict``, ``self``, ...), is a template variable, never a
    Python argument: how safely to render is the caller's decision, not the data's. The CLI's input
    object is read the same way.
    """
    from .render import PARAMETER_VARIABLES

    parameters: dict[str, Any] = {}
    variables: dict[str, Any] = {}
    for key, value in record.items():
        if key in PARAMETER_VARIABLES:
            parameters[key] = value
        elif key != "messages":
            variables[key] = value
    return parameters, variables


def _caller_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """The caller's render options as ``ChatTemplate.render`` parameters, the template variables merged into ``variables``."""
    from ..template import RENDER_PARAMETERS
    from .render import template_variables

    from ..training.apply import batch_tokenizing

    options = dict(options or {})
    carried = options.pop(_TOKENIZING, None)  # options made here already (each record's call sees them again)
    tokenizing = batch_tokenizing(options) or carried
    keywords = {key: value for key, value in options.items() if key not in RENDER_PARAMETERS}
    parameters = {key: value for key, value in options.items() if key in RENDER_PARAMETERS and key != "variables"}
    parameters["variables"] = template_variables(keywords, options.get("variables"))
    if tokenizing is not None:
        parameters[_TOKENIZING] = tokenizing
    return parameters


# the key of the caller's options that holds a tokenized batch's options (never a render parameter)
_TOKENIZING = "tokenizing"


def render_record(template: Any, record: Any, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One input record, shaped like ``chatjinja render``'s input (``messages``, optional ``tools``,
    ``documents``, ``add_generation_prompt``, ... and template variables: see :func:`split_record`)
    -> ``{"text": ...}`` or ``{"error": "..."}``; a tokenized batch (``tokenize=True``) gives
    ``{"input_ids": [...], "assistant_masks": [...]}`` instead. ``options`` (``render_batch``'s keyword
    arguments) apply to every record; a record's own keys win."""
    if not isinstance(record, dict):
        return {"error": f"record must be a JSON object with 'messages', got {type(record).__name__}"}
    messages = record.get("messages")
    if messages is None:
        return {"error": "record has no 'messages'"}
    if not isinstance(messages, list):
        return {"error": f"'messages' must be a list, got {type(messages).__name__}"}
    if messages and isinstance(messages[0], list):
        return {"error": "a batch record holds one conversation: 'messages' must be a list of messages"}
    parameters = _caller_options(options)
    own_parameters, own_variables = split_record(record)
    parameters.update(own_parameters)
    if own_variables:
        parameters["variables"] = {**parameters["variables"], **own_variables}
    tokenizing = parameters.pop(_TOKENIZING, None)
    try:
        if tokenizing is not None:
            from ..training.apply import tokenized_record

            return tokenized_record(template, messages, parameters, tokenizing)
        return {"text": template.render(messages, **parameters)}
    except Exception as exc:  # noqa: BLE001 - every failure becomes that record's error
        return {"error": _error_text(exc)}


def render_line(template: Any, line: str | bytes, options: dict[str, Any] | None = None) -> str:
    """A JSON line in, a JSON line out (no newline): the per-record function of every batch path."""
    if not line.strip():
        result = {"error": "empty line"}
    else:
        try:
            record = json.loads(line)
        except UnicodeDecodeError as exc:
            result = {"error": f"line is not valid UTF-8: {exc.reason} at byte {exc.start}"}
        except json.JSONDecodeError as exc:
            result = {"error": f"malformed JSON: {exc.msg} (column {exc.colno})"}
        except RecursionError:
            result = {"error": "malformed JSON: nested too deeply"}
        else:
            result = render_record(template, record, options)
    return json_text(result)


class _Oversized:
    """In place of an input line longer than the cap (never read into memory whole)."""

    def __init__(self, limit: int):
        self.limit = limit

    def record(self) -> str:
        return json_text({"error": f"line is longer than the input limit of {self.limit} bytes"})


def _bounded_lines(f: IO[bytes], limit: int, stop: int | None = None) -> Iterator[bytes | _Oversized]:
    """The lines from ``f``'s position to byte ``stop`` (else the end), without their line ends; a line
    longer than ``limit`` bytes comes as an :class:`_Oversized` and costs at most ``limit + 2`` bytes of memory."""
    readline, size = f.readline, limit + 2
    while stop is None or f.tell() < stop:
        chunk = readline(size)
        if not chunk:
            return
        if chunk.endswith(b"\n") or len(chunk) < limit + 2:
            line = chunk.rstrip(b"\r\n")
            yield line if len(line) <= limit else _Oversized(limit)
        else:
            while (rest := f.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield _Oversized(limit)


def _number_errors(text: str, first: int) -> str:
    """The error records of a chunk's output (lines ``first``, ``first + 1``, ...) with their input line number."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith('{"error"'):
            record = json.loads(line)
            record["line"] = first + i
            lines[i] = json_text(record)
    return "\n".join(lines)


# -- worker processes ----------------------------------------------------------------------------

_worker_template: Any = None
_worker_options: dict[str, Any] = {}


def _init_worker(template: Any, options: dict[str, Any]) -> None:
    """Pool initializer: the template and options arrive once per worker, not once per task."""
    global _worker_template, _worker_options
    _worker_template, _worker_options = template, options


def _render_line_chunk(lines: list[bytes | _Oversized], template: Any = None, options: Any = None) -> tuple[str, int, int]:
    """A chunk of input lines -> (the output lines joined, each ending in a newline; lines; errors).

    One string each way per chunk, not one object per line: less to pickle between processes.
    """
    if template is None:
        template, options = _worker_template, _worker_options
    out = [line.record() if isinstance(line, _Oversized) else render_line(template, line, options) for line in lines]
    return "".join(line + "\n" for line in out), len(out), _tally(out)


def _render_range_chunk(span: tuple[str, int, int, int], template: Any = None, options: Any = None) -> tuple[str, int, int]:
    """``_render_line_chunk`` on the lines in bytes ``start:end`` of a file, read by the worker itself.

    Sending byte ranges instead of the lines keeps the input out of the pipe to the workers.
    """
    path, start, end, limit = span
    with open(path, "rb") as f:
        f.seek(start)
        lines = list(_bounded_lines(f, limit, end))
    return _render_line_chunk(lines, template, options)


def _line_ranges(path: str | os.PathLike, size: int, limit: int) -> Iterator[tuple[str, int, int, int]]:
    """Byte ranges of ``size`` lines each (the same lines ``_read_lines`` yields)."""
    name = os.fspath(path)
    start = count = 0
    with open(path, "rb") as f:
        for _ in _bounded_lines(f, limit):
            count += 1
            if count == size:
                position = f.tell()
                yield name, start, position, limit
                start, count = position, 0
        if count:
            yield name, start, f.tell(), limit


def _render_record_chunk(records: list[Any], template: Any = None, options: Any = None) -> list[dict[str, str]]:
    if template is None:
        template, options = _worker_template, _worker_options
    return [render_record(template, record, options) for record in records]


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _chunk_size(total: int | None, workers: int, chunksize: int | None) -> int:
    if chunksize is not None:
        if chunksize < 1:
            raise ValueError(f"chunksize must be at least 1, got {chunksize}")
        return chunksize
    if total is None:
        return 64
    return max(1, min(_MAX_CHUNK, total // (workers * 8) or 1))


def _mp_context() -> Any:
    # fork starts a worker in milliseconds and inherits the warm caches; elsewhere the platform's default
    import multiprocessing

    if "fork" in multiprocessing.get_all_start_methods() and os.name == "posix":
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _ordered_map(
    func: Callable[..., list[Any]],
    chunks: Iterator[list[Any]],
    workers: int,
    template: Any,
    options: dict[str, Any],
) -> Iterator[list[Any]]:
    """``func`` over the chunks: in this process for one worker, else in a pool; results in input order.

    At most ``4 * workers`` chunks are in flight, so a huge input streams through in bounded memory.
    """
    if workers <= 1:
        for chunk in chunks:
            yield func(chunk, template, options)
        return
    executor: Executor = ProcessPoolExecutor(
        max_workers=workers, mp_context=_mp_context(), initializer=_init_worker, initargs=(template, options)
    )
    pending: deque[Future] = deque()
    try:
        for chunk in chunks:
            pending.append(executor.submit(func, chunk))
            if len(pending) >= 4 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        executor.shutdown(wait=True, cancel_futures=True)


def _check_workers(workers: int | None) -> int:
    if workers is None:
        return os.cpu_count() or 1
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    return workers


def render_batch(
    template: Any,
    conversations: Iterable[Any],
    /,
    *,
    workers: int | None = 1,
    chunksize: int | None = None,
    errors: str = "raise",
    **render_options: Any,
) -> list[Any]:
    """Render many conversations with one template; the texts, in input order.

    ``template`` is a :class:`~chatjinja.ChatTemplate`, a template source, a ``pathlib.Path`` or a
    dict (see :func:`chatjinja.template.chat_template_argument`). Each conversation is a list of
    messages, or a dict shaped like ``chatjinja render``'s input (``messages`` plus its own
    ``tools``, variables, ...: see :func:`split_record`; its keys win). ``render_options``
    (``tools=``, ``add_generation_prompt=``, ``bos_token=``, ``budgets=``, ``variables=``, ...) apply
    to every conversation, as for :meth:`~chatjinja.ChatTemplate.render`; a variable named like a
    parameter here (``workers``, ``errors``, ``budgets``, ...) goes in ``variables=``. ``workers`` > 1
    renders in that many processes (``None``: one per CPU); everything must then be picklable
    (JSON-like data is). ``tokenize=True`` (with ``tokenizer=``, or the template's own from its model
    folder; also ``sanitize_control_tokens=``, ``assistant_masks=``) gives each conversation's
    ``{"input_ids": [...], "assistant_masks": [...]}`` instead of its text, as ``apply_chat_template``
    computes them.
    ``errors="raise"`` raises :class:`RenderBatchError` for the first conversation (in input order)
    that fails; ``errors="return"`` puts a :class:`RenderFailure` in its place instead.
    """
    if errors not in ("raise", "return"):
        raise ValueError(f"errors must be 'raise' or 'return', got {errors!r}")
    workers = _check_workers(workers)
    chat_template = chat_template_argument(template)
    render_options = _caller_options(render_options)
    records = [item if isinstance(item, dict) else {"messages": _messages(item)} for item in conversations]
    size = _chunk_size(len(records), workers, chunksize)
    results: list[Any] = []
    for chunk_results in _ordered_map(_render_record_chunk, _chunks(records, size), workers, chat_template, render_options):
        for result in chunk_results:
            index = len(results)
            if "error" in result:
                if errors == "raise":
                    raise RenderBatchError(index, result["error"])
                results.append(RenderFailure(index, result["error"]))
            else:
                results.append(result["text"] if "text" in result else result)
    return results


def _messages(conversation: Any) -> Any:
    messages = getattr(conversation, "messages", conversation)
    if isinstance(messages, tuple):
        return list(messages)
    return messages


# -- JSONL files ---------------------------------------------------------------------------------


def _read_lines(path: str | os.PathLike, limit: int) -> Iterator[bytes | _Oversized]:
    with open(path, "rb") as f:
        yield from _bounded_lines(f, limit)


def _check_input(path: str | os.PathLike) -> None:
    """A readable regular file (it is read twice: once to count the lines), else one error naming it."""
    name = os.fspath(path)
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise FileError(f"{name} is not a regular file (a batch input is read twice: give a file)")
    except FileNotFoundError:
        raise FileError(f"input file not found: {name}") from None
    except IsADirectoryError:
        raise FileError(f"{name} is a directory, not a file") from None
    except FileError:
        raise
    except OSError as exc:
        raise FileError(f"cannot read {name}: {exc.strerror or exc}") from None


def _count_lines(path: str | os.PathLike) -> int:
    count, last = 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def _tally(lines: Sequence[str]) -> int:
    return sum(1 for line in lines if line.startswith('{"error"'))


def render_jsonl(
    template: Any,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    /,
    *,
    workers: int | None = 1,
    chunksize: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    max_line_bytes: int = DEFAULT_MAX_INPUT_BYTES,
    **render_options: Any,
) -> BatchSummary:
    """Render a JSONL file (one conversation record per line) into a JSONL file, line for line.

    Output line *i* is ``{"text": ...}`` or ``{"error": "...", "line": i}`` for input line *i*: a
    malformed, failing or over-long (``max_line_bytes``) line costs only its own record, and the file
    is written whatever the lines hold. The output file appears whole or not at all (an interrupt
    or a failure to write leaves no file). ``progress(done, total)`` is called after every chunk.
    """
    workers = _check_workers(workers)
    if not isinstance(max_line_bytes, int) or max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be a positive integer, got {max_line_bytes!r}")
    chat_template = chat_template_argument(template)
    render_options = _caller_options(render_options)
    _check_input(input_path)
    total = _count_lines(input_path)
    size = _chunk_size(total, workers, chunksize)
    started = time.perf_counter()
    done = errors = 0
    first_error: int | None = None
    with atomic_text_file(output_path) as output:
        if workers > 1:  # workers read their own lines: only byte ranges cross the process boundary
            ranges = _line_ranges(input_path, size, max_line_bytes)
            results = _ordered_map(_render_range_chunk, ranges, workers, chat_template, render_options)
        else:
            lines = _chunks(_read_lines(input_path, max_line_bytes), size)
            results = _ordered_map(_render_line_chunk, lines, workers, chat_template, render_options)
        for text, count, failed in results:
            if failed:
                text = _number_errors(text, done + 1)
                if first_error is None:
                    first_error = done + 1 + _first_error_index(text)
            output.write(text)
            done += count
            errors += failed
            if progress is not None:
                progress(done, total)
    return BatchSummary(
        ok=done - errors, errors=errors, seconds=time.perf_counter() - started, workers=workers, first_error_line=first_error
    )


def _first_error_index(text: str) -> int:
    return next(i for i, line in enumerate(text.split("\n")) if line.startswith('{"error"'))


# -- Dask ----------------------------------------------------------------------------------------


def render_lines(
    lines: Iterable[str], template: Any, options: dict[str, Any] | None = None, max_line_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> list[str]:
    """:func:`render_line` over the lines of a ``dask.bag.read_text(..., errors="surrogateescape")``
    partition: the function to ``map_partitions`` on a cluster (see the README). ``template`` is what
    :func:`render_batch` takes. A line longer than ``max_line_bytes`` is an error record, as in
    :func:`render_jsonl`."""
    template = chat_template_argument(template)  # a Path or dict is loaded once per partition, not once per line
    out = []
    for text in lines:
        # decoded with surrogateescape: back to the file's bytes, so a bad line reads as in render_jsonl
        line = text.rstrip("\r\n").encode("utf-8", "surrogateescape")
        out.append(_Oversized(max_line_bytes).record() if len(line) > max_line_bytes else render_line(template, line, options))
    return out


def render_jsonl_dask(
    template: Any,
    input_path: str,
    output_path: str | os.PathLike,
    /,
    *,
    blocksize: int | str | None = "4MiB",
    scheduler: Any = None,
    max_line_bytes: int = DEFAULT_MAX_INPUT_BYTES,
    **render_options: Any,
) -> BatchSummary:
    """:func:`render_jsonl` on Dask: the input is split into ``blocksize`` partitions at line
    boundaries, each rendered by a task; the results come back in order into one output file.

    ``input_path`` may be anything ``dask.bag.read_text`` reads (a local path, a glob, ``s3://...``)
    and must be readable by every worker. ``scheduler`` is passed to ``compute`` (a
    ``distributed.Client`` makes it run on that cluster; by default the active client, if any).
    Error records name their input line, as in :func:`render_jsonl`. Needs the ``dask`` extra.
    """
    try:
        import dask.bag as db
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ChatJinjaError("render_jsonl_dask needs Dask: pip install 'chatjinja[dask]'") from exc
    chat_template = chat_template_argument(template)
    render_options = _caller_options(render_options)
    started = time.perf_counter()
    bag = db.read_text(input_path, blocksize=blocksize, encoding="utf-8", errors="surrogateescape")
    rendered = bag.map_partitions(render_lines, chat_template, render_options, max_line_bytes)
    lines = rendered.compute(scheduler=scheduler) if scheduler is not None else rendered.compute()
    errors = _tally(lines)
    text = "".join(line + "\n" for line in lines)
    first_error = None
    if errors:
        text = _number_errors(text, 1)
        first_error = 1 + _first_error_index(text)
    with atomic_text_file(output_path) as output:
        output.write(text)
    return BatchSummary(
        ok=len(lines) - errors, errors=errors, seconds=time.perf_counter() - started, workers=0, first_error_line=first_error
    )
