"""``chatjinja cache``: the on-disk cache of compiled templates (where it is, its size; prune or clear it)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._common import UsageError, write_stdout


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="show, prune or clear the on-disk cache of compiled templates",
        description=(
            "The compiled templates cached on disk ($CHATJINJA_CACHE_DIR, else $XDG_CACHE_HOME/chatjinja, "
            "else ~/.cache/chatjinja), at most $CHATJINJA_CACHE_MAX_MB megabytes (default 128; 0: no limit). "
            "info says whether the cache is used and, if not, why. Exit 1 when prune or clear could not "
            "delete a file (each is named on stderr)."
        ),
    )
    parser.add_argument("action", nargs="?", default="info", choices=("info", "prune", "clear"),
                        help="info (default): where and how big; prune: delete the least recently used entries "
                        "down to 90%% of the limit; clear: delete every entry")
    parser.add_argument("--max-mb", type=float, default=None, metavar="MB", help="with prune: this limit instead of the configured one (0: no limit)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..runtime import diskcache  # lazy: the CLI imports every command to build its parser; the runtime loads jinja2

    if args.max_mb is not None and (args.action != "prune" or not 0 <= args.max_mb < float("inf")):
        raise UsageError("--max-mb takes a number of megabytes >= 0, with prune only")
    result: dict[str, Any] = {}
    failed: list[str] = []
    if args.action == "prune":
        limit = None if args.max_mb is None else int(args.max_mb * 1024 * 1024)
        result["deleted"] = 0 if limit == 0 else diskcache.prune(limit, failed)
    elif args.action == "clear":
        result["deleted"] = diskcache.clear(failed)
    if args.action != "info":
        result["failed"] = failed
    result.update(diskcache.usage())
    for line in failed:
        print(f"error: could not delete {line}", file=sys.stderr)
    code = 1 if failed else 0
    if args.json:
        write_stdout(json.dumps(result, indent=2) + "\n")
        return code
    lines = []
    if "deleted" in result:
        lines.append(f"deleted {result['deleted']} file(s)" + (f", {len(failed)} could not be deleted" if failed else ""))
    limit = "none" if result["limit"] is None else _mb(result["limit"])
    lines += [
        f"directory: {result['directory']}" + ("" if result["enabled"] else f" (not used: {result['reason']})"),
        f"entries:   {result['entries']}, {_mb(result['bytes'])} on disk (limit {limit})",
    ]
    write_stdout("\n".join(lines) + "\n")
    return code


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"
