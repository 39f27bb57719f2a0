"""chatjinja's driver for minijinja (the engine of TGI and mistral.rs), through its Python binding.

stdin: one JSON object ``{"source": TEMPLATE, "contexts": [CONTEXT, ...]}``; stdout: ``{"ready": true}``
once the template is parsed, then one JSON line per context, in order: ``{"text": OUTPUT}`` or
``{"error": ONE_LINE}``. The environment is configured as
TGI and mistral.rs configure theirs: minijinja-contrib's pycompat (Python string, list and dict
methods), trim_blocks and lstrip_blocks (as transformers), ``raise_exception`` and ``strftime_now``
functions; ``tojson`` is minijinja's own. Run as a script: it imports nothing from chatjinja.
"""

import datetime
import json
import sys

import minijinja


def _raise_exception(message):
    raise minijinja.TemplateError(str(message))


def _strftime_now(format_string):
    return datetime.datetime.now().strftime(format_string)


def _one_line(error):
    # minijinja's message is the first line; the lines after it show the template around the error
    lines = str(error).strip().splitlines() or [""]
    return " ".join(f"{type(error).__name__}: {lines[0]}".split())[:300]


def main():
    request = json.loads(sys.stdin.read())
    environment = minijinja.Environment(pycompat=True, trim_blocks=True, lstrip_blocks=True)
    environment.add_function("raise_exception", _raise_exception)
    environment.add_function("strftime_now", _strftime_now)
    parse_error = None
    try:
        environment.add_template("chat_template", request["source"])
    except Exception as error:  # noqa: BLE001 - the engine's own error, reported as a result
        parse_error = "parse error: " + _one_line(error)
    out = sys.stdout
    out.write('{"ready": true}\n')  # the first render's clock starts here
    out.flush()
    for context in request["contexts"]:
        if parse_error is not None:
            result = {"error": parse_error}
        else:
            try:
                result = {"text": environment.render_template("chat_template", **context)}
            except Exception as error:  # noqa: BLE001
                result = {"error": _one_line(error)}
        out.write(json.dumps(result) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
