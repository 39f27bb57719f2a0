"""The front door of batch rendering: many conversations through one template, in input order.

``render_batch`` (Python objects), ``render_jsonl`` (files, the CLI's ``render --batch``),
``render_jsonl_dask`` (a Dask cluster) and ``render_lines`` (a Dask partition) decide the template
argument once (:func:`chatjinja.template.chat_template_argument`) and the caller's options once, then
hand one record function, :class:`RecordRenderer`, to the runtime's batch engine
(:mod:`chatjinja.runtime.batch`), which only decides where it runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .files import DEFAULT_MAX_INPUT_BYTES
from .runtime.batch import (
    BatchSummary,
    RenderBatchError,
    RenderFailure,
    check_workers,
    error_text,
    map_records,
    render_jsonl_file,
    render_jsonl_on_dask,
    render_partition,
)
from .runtime.batch import render_line as _render_line
from .runtime.render import TOKENIZE_PARAMETERS, UNSUPPORTED_PARAMETERS, unsupported_parameter
from .template import PARAMETER_VARIABLES, RENDER_PARAMETERS, ChatTemplate, chat_template_argument, template_variables
from .training.apply import batch_tokenizing, prepare_batch, tokenized_record

__all__ = [
    "BatchSummary",
    "RecordRenderer",
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

# the key of the caller's options that holds a tokenized batch's options (never a render parameter)
_TOKENIZING = "tokenizing"


def split_record(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """An input object's keys other than ``messages`` -> (render parameters, template variables).

    ``tools``, ``documents``, ``add_generation_prompt``, ``continue_final_message`` and
    ``chat_template`` are those parameters, as in transformers' ``apply_chat_template``; its tokenizing
    parameters (``tokenize``, ``padding``, ...) and those chatjinja does not support raise ``TypeError``:
    they are the call's, never a record's, and never template variables. Every other key, whatever its
    name (``budgets``, ``strict``, ``self``, ...), is a template variable, never a Python argument: how
    safely to render is the caller's decision, not the data's. The CLI's input object is read the same way.
    """
    parameters: dict[str, Any] = {}
    variables: dict[str, Any] = {}
    for key, value in record.items():
        if key in TOKENIZE_PARAMETERS:
            raise TypeError(
                f"{key!r} is a parameter of transformers' apply_chat_template, not a template variable: "
                "a record cannot set it (tokenizing options are the call's)"
            )
        if key in UNSUPPORTED_PARAMETERS:
            raise TypeError(unsupported_parameter(key))
        if key in PARAMETER_VARIABLES:
            parameters[key] = value
        elif key != "messages":
            variables[key] = value
    return parameters, variables


def _caller_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """The caller's render options as ``ChatTemplate.render`` parameters, the template variables merged into ``variables``."""
    options = dict(options or {})
    carried = options.pop(_TOKENIZING, None)  # options made here already (each record's call sees them again)
    tokenizing = batch_tokenizing(options) or carried
    keywords = {key: value for key, value in options.items() if key not in RENDER_PARAMETERS}
    parameters = {key: value for key, value in options.items() if key in RENDER_PARAMETERS and key != "variables"}
    parameters["variables"] = template_variables(keywords, options.get("variables"))
    if tokenizing is not None:
        parameters[_TOKENIZING] = tokenizing
    return parameters


def _render_record(template: ChatTemplate, record: Any, options: dict[str, Any]) -> dict[str, Any]:
    """One input record with options made by :func:`_caller_options`."""
    if not isinstance(record, dict):
        return {"error": f"record must be a JSON object with 'messages', got {type(record).__name__}"}
    messages = record.get("messages")
    if messages is None:
        return {"error": "record has no 'messages'"}
    if not isinstance(messages, list):
        return {"error": f"'messages' must be a list, got {type(messages).__name__}"}
    if messages and isinstance(messages[0], list):
        return {"error": "a batch record holds one conversation: 'messages' must be a list of messages"}
    parameters = dict(options)
    tokenizing = parameters.pop(_TOKENIZING, None)
    try:
        own_parameters, own_variables = split_record(record)
        parameters.update(own_parameters)
        if own_variables:
            parameters["variables"] = {**parameters["variables"], **own_variables}
        if tokenizing is not None:
            return tokenized_record(template, messages, parameters, tokenizing)
        return {"text": template.render(messages, **parameters)}
    except Exception as exc:  # noqa: BLE001 - every failure becomes that record's error
        return {"error": error_text(exc)}


@dataclass(frozen=True)
class RecordRenderer:
    """The record function of a batch: one template and the caller's options, picklable for worker processes."""

    template: ChatTemplate
    options: dict[str, Any]

    @classmethod
    def of(cls, template: Any, options: dict[str, Any] | None) -> "RecordRenderer":
        """The record function; a tokenized batch's once-per-run work (tagging, the warning) done here, before any worker."""
        template = chat_template_argument(template)
        options = _caller_options(options)
        if options.get(_TOKENIZING) is not None:
            options[_TOKENIZING] = prepare_batch(template, options, options[_TOKENIZING])
        return cls(template, options)

    def __call__(self, record: Any) -> dict[str, Any]:
        return _render_record(self.template, record, self.options)


def render_record(template: Any, record: Any, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One input record, shaped like ``chatjinja render``'s input (``messages``, optional ``tools``,
    ``documents``, ``add_generation_prompt``, ... and template variables: see :func:`split_record`)
    -> ``{"text": ...}`` or ``{"error": "..."}``; a tokenized batch (``tokenize=True``) gives
    ``{"input_ids": [...], "assistant_masks": [...]}`` instead. ``options`` (``render_batch``'s keyword
    arguments) apply to every record; a record's own keys win."""
    return RecordRenderer.of(template, options)(record)


def render_line(template: Any, line: str | bytes, options: dict[str, Any] | None = None) -> str:
    """A JSON line in, a JSON line out (no newline): the per-record function of every batch path."""
    return _render_line(RecordRenderer.of(template, options), line)


def _messages(conversation: Any) -> Any:
    messages = getattr(conversation, "messages", conversation)
    if isinstance(messages, tuple):
        return list(messages)
    return messages


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
    workers = check_workers(workers)
    render = RecordRenderer.of(template, render_options)
    records = [item if isinstance(item, dict) else {"messages": _messages(item)} for item in conversations]
    results: list[Any] = []
    for result in map_records(render, records, workers, chunksize):
        index = len(results)
        if "error" in result:
            if errors == "raise":
                raise RenderBatchError(index, result["error"])
            results.append(RenderFailure(index, result["error"]))
        else:
            results.append(result["text"] if "text" in result else result)
    return results


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
    return render_jsonl_file(  # (it checks workers and max_line_bytes)
        RecordRenderer.of(template, render_options), input_path, output_path, workers=workers, chunksize=chunksize, progress=progress, max_line_bytes=max_line_bytes
    )


def render_lines(
    lines: Iterable[str], template: Any, options: dict[str, Any] | None = None, max_line_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> list[str]:
    """:func:`render_line` over the lines of a ``dask.bag.read_text(..., errors="surrogateescape")``
    partition: the function to ``map_partitions`` on a cluster (see the README). ``template`` is what
    :func:`render_batch` takes. A line longer than ``max_line_bytes`` is an error record, as in
    :func:`render_jsonl`."""
    # a Path or dict is loaded once per partition, not once per line
    return render_partition(lines, RecordRenderer.of(template, options), max_line_bytes)


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
    return render_jsonl_on_dask(
        RecordRenderer.of(template, render_options),
        input_path,
        output_path,
        blocksize=blocksize,
        scheduler=scheduler,
        max_line_bytes=max_line_bytes,
    )
