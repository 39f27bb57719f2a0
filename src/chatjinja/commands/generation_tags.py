"""``chatjinja generation-tags TEMPLATE [-o OUT]``: a copy of the template with ``{% generation %}`` tags around each assistant turn."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import TemplateSyntaxError
from ..limits import StaticLimitExceeded
from ._common import TEMPLATE_HELP, load_template_arg, write_atomic, write_stdout


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "generation-tags",
        help="write a copy of a template with {%% generation %%} tags around what the model writes",
        description="Write a copy of TEMPLATE with {% generation %}...{% endgeneration %} around each assistant "
        "turn's reasoning, content, tool calls and end-of-turn marker (not its role header), so that "
        "return_assistant_tokens_mask=True gives real masks. The copy is checked to render the same text as the "
        "template before it is written; a template that cannot be tagged provably is refused (exit 1, the reason "
        "on stderr). A template that already has generation tags is written unchanged.",
    )
    parser.add_argument("template", metavar="TEMPLATE", help=TEMPLATE_HELP)
    parser.add_argument("--output", "-o", metavar="OUT", default="-",
                        help="write the tagged template to OUT, whole or not at all (default: - for stdout)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..training.generation_tags import GenerationTagsRefused, add_generation_tags  # lazy: the CLI imports every command to build its parser; this loads Lark

    template = load_template_arg(args.template)
    try:
        tagged = add_generation_tags(template.source)
    except GenerationTagsRefused as exc:
        raise GenerationTagsRefused(f"cannot add generation tags: {exc}", exc.kind, source_name=args.template) from None
    except (TemplateSyntaxError, StaticLimitExceeded) as exc:  # the parser's: named by the file, not "<string>"
        exc.source_name = args.template
        raise
    if args.output == "-":
        write_stdout(tagged)
    else:
        write_atomic(args.output, tagged)
    return 0
