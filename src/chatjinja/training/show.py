"""Training data as people check it: the rendered text with token boundaries visible and trained tokens marked.

Plain (a file, a pipe): tokens separated by ``·``, each run of trained tokens (assistant mask 1)
between ``«`` and ``»``; removing those three characters gives the rendered text back. On a
terminal (and ``NO_COLOR`` unset), trained tokens are green, the others grey, and tokens alternate
in brightness instead of the separators. Control tokens are shown as their text (``<|im_end|>``),
whitespace as it is. Imports nothing heavy: the ``render`` command uses it directly.
"""

from __future__ import annotations

import os
from typing import Any, TextIO

__all__ = ["BOUNDARY", "OPEN", "CLOSE", "token_pieces", "show_masks", "use_colour"]

BOUNDARY, OPEN, CLOSE = "·", "«", "»"
_TRAINED = ("\x1b[30;42m", "\x1b[30;102m")  # black on green, on bright green
_UNTRAINED = ("\x1b[90m", "\x1b[37m")  # grey, light grey
_RESET = "\x1b[0m"


def use_colour(stream: TextIO) -> bool:
    """ANSI colours only on a terminal and when ``NO_COLOR`` is unset (https://no-color.org)."""
    return not os.environ.get("NO_COLOR") and hasattr(stream, "isatty") and stream.isatty()


def token_pieces(backend: Any, text: str, input_ids: list[int]) -> list[str]:
    """The text of each token, ``"".join`` of them being ``text`` when ``input_ids`` are ``text``'s encoding.

    Cut at the tokenizer's offsets (a byte-level token inside a character gets ``""``, the character
    goes to the first token that covers it; text no token covers goes to the token after). When
    the ids are not the plain encoding of ``text`` (control tokens encoded as text), each id is decoded alone.
    """
    encoding = backend.encode(text, add_special_tokens=False)
    if list(encoding.ids) != list(input_ids):
        return [backend.decode([token_id], skip_special_tokens=False) for token_id in input_ids]
    pieces: list[str] = []
    done = 0
    for _, end in encoding.offsets:
        end = max(end, done)
        pieces.append(text[done:end])
        done = end
    if pieces and done < len(text):
        pieces[-1] += text[done:]
    return pieces


def show_masks(pieces: list[str], mask: list[int], colour: bool = False) -> str:
    """The pieces with boundaries and trained runs marked (plain) or coloured (``colour=True``)."""
    out: list[str] = []
    if colour:
        for index, (piece, trained) in enumerate(zip(pieces, mask)):
            style = (_TRAINED if trained else _UNTRAINED)[index % 2]
            # a newline ends the colour: a background must not run to the edge of the terminal
            out.append("\n".join(style + line + _RESET if line else line for line in piece.split("\n")))
        return "".join(out)
    inside = False
    for index, (piece, trained) in enumerate(zip(pieces, mask)):
        if trained and not inside:
            out.append(OPEN)
        elif not trained and inside:
            out.append(CLOSE)
        elif index:
            out.append(BOUNDARY)
        inside = bool(trained)
        out.append(piece)
    if inside:
        out.append(CLOSE)
    return "".join(out)
