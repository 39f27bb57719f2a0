"""Batch engine: many records through one record function, in worker processes, results in input order.

The front door (``chatjinja.batch``) makes the record function (a picklable callable: one input
record -> ``{"text": ...}`` or ``{"error": "..."}``) and decides nothing here; this module only
decides where it runs: in this process, in worker processes (:func:`map_records`,
:func:`render_jsonl_file`) or on a Dask cluster (:func:`render_jsonl_on_dask`). Worker processes get
the record function once, in their initializer, and take chunks of records; each compiles the
template once (the in-memory cache, or the disk cache when it is warm).

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

__all__ = [
    "BatchSummary",
    "RecordFunction",
    "RenderBatchError",
    "RenderFailure",
    "error_text",
    "map_records",
    "read_lines",
    "render_jsonl_file",
    "render_jsonl_on_dask",
    "render_line",
    "render_partition",
]

#: one input record (any JSON value) -> ``{"text": ...}``, ``{"error": "..."}`` or a tokenized record
RecordFunction = Callable[[Any], dict]

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
    #: tokenized records written, and how many of them have an all-zero assistant mask (no assistant token)
    tokenized: int = 0
    unmasked: int = 0

    @property
    def total(self) -> int:
        return self.ok + self.errors

    @property
    def rate(self) -> float:
        return self.total / self.seconds if self.seconds > 0 else float("inf")

    def line(self) -> str:
        first = f" (first on line {self.first_error_line})" if self.first_error_line is not None else ""
        unmasked = f", {self.unmasked} with no assistant token" if self.tokenized else ""
        return (
            f"rendered {self.total} conversations: {self.ok} ok, {self.errors} errors{first}{unmasked}, "
            f"{self.rate:.0f}/s ({self.seconds:.2f} s, {self.workers} worker{'s' if self.workers != 1 else ''})"
        )


def error_text(exc: BaseException) -> str:
    """One line: the exception class and the first line of its message (and the template line, if known)."""
    text = str(exc).strip()
    message = text.splitlines()[0] if text else ""
    line = getattr(exc, "lineno", None)
    where = f" (template line {line})" if isinstance(line, int) and f"line {line}" not in message else ""
    return f"{type(exc).__name__}: {message}{where}" if message else f"{type(exc).__name__}{where}"


def render_line(render: RecordFunction, line: str | bytes) -> str:
    """A JSON line in, a JSON line out (no newline): the per-line function of every file path."""
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
            result = render(record)
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

_worker_render: Any = None


def _init_worker(render: RecordFunction) -> None:
    """Pool initializer: the record function (its template and options) arrives once per worker, not once per task."""
    global _worker_render
    _worker_render = render


def _render_line_chunk(lines: list[bytes | _Oversized], render: Any = None) -> tuple[str, int, int, tuple[int, int]]:
    """A chunk of input lines -> (the output lines joined, each ending in a newline; lines; errors;
    (tokenized records, those with an all-zero assistant mask)).

    One string each way per chunk, not one object per line: less to pickle between processes.
    """
    render = _worker_render if render is None else render
    out = [line.record() if isinstance(line, _Oversized) else render_line(render, line) for line in lines]
    return "".join(line + "\n" for line in out), len(out), _tally(out), _masks(out)


_MASKS_KEY = '"assistant_masks": ['


def _masks(lines: Sequence[str]) -> tuple[int, int]:
    """(tokenized records, those whose assistant mask holds no 1) among output lines (``json_text``'s separators;
    the mask is a tokenized record's last key, so a 1 after it is in the mask)."""
    tokenized = unmasked = 0
    for line in lines:
        if line.startswith('{"input_ids"'):
            tokenized += 1
            unmasked += "1" not in line[line.rfind(_MASKS_KEY) :]
    return tokenized, unmasked


def _render_range_chunk(span: tuple[str, int, int, int], render: Any = None) -> tuple[str, int, int, tuple[int, int]]:
    """``_render_line_chunk`` on the lines in bytes ``start:end`` of a file, read by the worker itself.

    Sending byte ranges instead of the lines keeps the input out of the pipe to the workers.
    """
    path, start, end, limit = span
    with open(path, "rb") as f:
        f.seek(start)
        lines = list(_bounded_lines(f, limit, end))
    return _render_line_chunk(lines, render)


def _line_ranges(path: str | os.PathLike, size: int, limit: int) -> Iterator[tuple[str, int, int, int]]:
    """Byte ranges of ``size`` lines each (the same lines ``read_lines`` yields)."""
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


def _render_record_chunk(records: list[Any], render: Any = None) -> list[dict[str, str]]:
    render = _worker_render if render is None else render
    return [render(record) for record in records]


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
    import multiprocessing  # lazy: only a batch with several workers starts processes

    if "fork" in multiprocessing.get_all_start_methods() and os.name == "posix":
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _ordered_map(
    func: Callable[..., list[Any]],
    chunks: Iterator[list[Any]],
    workers: int,
    render: RecordFunction,
) -> Iterator[list[Any]]:
    """``func`` over the chunks: in this process for one worker, else in a pool; results in input order.

    At most ``4 * workers`` chunks are in flight, so a huge input streams through in bounded memory.
    """
    if workers <= 1:
        for chunk in chunks:
            yield func(chunk, render)
        return
    executor: Executor = ProcessPoolExecutor(
        max_workers=workers, mp_context=_mp_context(), initializer=_init_worker, initargs=(render,)
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


def check_workers(workers: int | None) -> int:
    """A worker count as given (``None``: one per CPU), else ``ValueError``."""
    if workers is None:
        return os.cpu_count() or 1
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    return workers


def map_records(
    render: RecordFunction, records: list[Any], workers: int | None = 1, chunksize: int | None = None
) -> Iterator[dict]:
    """``render`` over ``records``, in this process (one worker) or in ``workers`` processes (``None``: one per
    CPU; ``render`` and the records must then be picklable); the results in input order."""
    workers = check_workers(workers)
    size = _chunk_size(len(records), workers, chunksize)
    for chunk_results in _ordered_map(_render_record_chunk, _chunks(records, size), workers, render):
        yield from chunk_results


# -- JSONL files ---------------------------------------------------------------------------------


def read_lines(path: str | os.PathLike, limit: int) -> Iterator[bytes | _Oversized]:
    """A file's lines without their line ends; a line over ``limit`` bytes comes as an ``_Oversized`` (its ``record()`` says so)."""
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


def render_jsonl_file(
    render: RecordFunction,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    *,
    workers: int | None = 1,
    chunksize: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    max_line_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> BatchSummary:
    """``render`` over a JSONL file's records into a JSONL file, line for line (see ``chatjinja.batch.render_jsonl``)."""
    workers = check_workers(workers)
    if not isinstance(max_line_bytes, int) or max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be a positive integer, got {max_line_bytes!r}")
    _check_input(input_path)
    total = _count_lines(input_path)
    size = _chunk_size(total, workers, chunksize)
    started = time.perf_counter()
    done = errors = tokenized = unmasked = 0
    first_error: int | None = None
    with atomic_text_file(output_path) as output:
        if workers > 1:  # workers read their own lines: only byte ranges cross the process boundary
            ranges = _line_ranges(input_path, size, max_line_bytes)
            results = _ordered_map(_render_range_chunk, ranges, workers, render)
        else:
            lines = _chunks(read_lines(input_path, max_line_bytes), size)
            results = _ordered_map(_render_line_chunk, lines, workers, render)
        for text, count, failed, (chunk_tokenized, chunk_unmasked) in results:
            tokenized += chunk_tokenized
            unmasked += chunk_unmasked
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
        ok=done - errors, errors=errors, seconds=time.perf_counter() - started, workers=workers, first_error_line=first_error,
        tokenized=tokenized, unmasked=unmasked,
    )


def _first_error_index(text: str) -> int:
    return next(i for i, line in enumerate(text.split("\n")) if line.startswith('{"error"'))


# -- Dask ----------------------------------------------------------------------------------------


def render_partition(lines: Iterable[str], render: RecordFunction, max_line_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> list[str]:
    """:func:`render_line` over the lines of a ``dask.bag.read_text(..., errors="surrogateescape")`` partition;
    a line longer than ``max_line_bytes`` is an error record, as in :func:`render_jsonl_file`."""
    out = []
    for text in lines:
        # decoded with surrogateescape: back to the file's bytes, so a bad line reads as in render_jsonl_file
        line = text.rstrip("\r\n").encode("utf-8", "surrogateescape")
        out.append(_Oversized(max_line_bytes).record() if len(line) > max_line_bytes else render_line(render, line))
    return out


def render_jsonl_on_dask(
    render: RecordFunction,
    input_path: str,
    output_path: str | os.PathLike,
    *,
    blocksize: int | str | None = "4MiB",
    scheduler: Any = None,
    max_line_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> BatchSummary:
    """:func:`render_jsonl_file` on Dask (see ``chatjinja.batch.render_jsonl_dask``)."""
    try:
        import dask.bag as db  # lazy: the dask extra is optional
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ChatJinjaError("render_jsonl_dask needs Dask: pip install 'chatjinja[dask]'") from exc
    started = time.perf_counter()
    bag = db.read_text(input_path, blocksize=blocksize, encoding="utf-8", errors="surrogateescape")
    rendered = bag.map_partitions(render_partition, render, max_line_bytes)
    lines = rendered.compute(scheduler=scheduler) if scheduler is not None else rendered.compute()
    errors = _tally(lines)
    tokenized, unmasked = _masks(lines)
    text = "".join(line + "\n" for line in lines)
    first_error = None
    if errors:
        text = _number_errors(text, 1)
        first_error = 1 + _first_error_index(text)
    with atomic_text_file(output_path) as output:
        output.write(text)
    return BatchSummary(
        ok=len(lines) - errors, errors=errors, seconds=time.perf_counter() - started, workers=0, first_error_line=first_error,
        tokenized=tokenized, unmasked=unmasked,
    )
