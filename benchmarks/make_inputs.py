"""Write the committed benchmark inputs (deterministic: run it again and the files do not change).

    python benchmarks/make_inputs.py

``inputs/conversations.json`` holds three conversations for the Devstral template (short: 3
messages; medium: 11 messages with one tool call; long: a 41-message tool conversation) and the
tool schemas they use. ``inputs/batch.jsonl`` is made at run time by ``bench_batch.py`` from these.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    arg: {"type": "string", "description": f"The {arg.replace('_', ' ')}."} for arg in args
                },
                "required": list(args[:1]),
            },
        },
    }
    for name, description, args in [
        ("read_file", "Read a file from the repository and return its text.", ("path", "encoding")),
        ("search_code", "Search the repository for a regular expression.", ("pattern", "glob")),
        ("run_tests", "Run the test suite, or a part of it, and return the summary.", ("selector", "timeout")),
        ("edit_file", "Replace an exact string in a file with another string.", ("path", "old", "new")),
    ]
]

_WORDS = (
    "the a function test file returns value error module import call render template message tool "
    "result when where should fails passes because list dict string token cache worker batch line"
).split()


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def _text(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng, rng.randint(6, 16)) for _ in range(sentences))


def conversation(rng: random.Random, turns: int, tool_every: int) -> list[dict]:
    """system + ``turns`` user/assistant exchanges; every ``tool_every``-th one goes through a tool call."""
    messages: list[dict] = [{"role": "system", "content": _text(rng, 3)}]
    call_id = 0
    for turn in range(turns):
        messages.append({"role": "user", "content": _text(rng, rng.randint(1, 4))})
        if tool_every and turn % tool_every == tool_every - 1:
            tool = rng.choice(TOOLS)["function"]
            arguments = {name: _sentence(rng, 2) for name in tool["parameters"]["properties"]}
            call_id += 1
            messages.append(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": f"call{call_id:05d}", "type": "function", "function": {"name": tool["name"], "arguments": arguments}}
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": f"call{call_id:05d}", "content": _text(rng, rng.randint(2, 6))})
        messages.append({"role": "assistant", "content": _text(rng, rng.randint(1, 5))})
    return messages


def main() -> None:
    rng = random.Random(20261129)
    short = conversation(rng, 1, 0)  # 3 messages
    medium = conversation(rng, 4, 4)  # 11 messages, one tool call
    long = conversation(rng, 15, 3)  # 41 messages, tool calls
    assert (len(short), len(medium), len(long)) == (3, 11, 41), (len(short), len(medium), len(long))
    data = {"tools": TOOLS, "conversations": {"short": short, "medium": medium, "long": long}}
    (HERE / "inputs").mkdir(exist_ok=True)
    (HERE / "inputs" / "conversations.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
