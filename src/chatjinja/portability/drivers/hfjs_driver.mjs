// chatjinja's driver for @huggingface/jinja (the engine of transformers.js), run with node.
//
// argv[2]: the folder holding node_modules/@huggingface/jinja. stdin: one JSON object
// {"source": TEMPLATE, "contexts": [CONTEXT, ...]}; stdout: {"ready": true} once the template is
// parsed, then one JSON line per context, in order: {"text": OUTPUT} or {"error": ONE_LINE}. Each
// context is rendered as transformers.js' apply_chat_template renders it: new
// Template(source).render(context) (the Template constructor turns trim_blocks and lstrip_blocks on;
// render sets raise_exception, strftime_now and range).
import { createRequire } from "node:module";
import { readFileSync, writeSync } from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.argv[2], "package.json"));
const { Template } = require("@huggingface/jinja");

function oneLine(error) {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return message.replace(/[\r\n]+/g, " ").slice(0, 300);
}

function emit(result) {
  writeSync(1, JSON.stringify(result) + "\n");
}

const request = JSON.parse(readFileSync(0, "utf8"));
let template = null;
let parseError = null;
try {
  template = new Template(request.source);
} catch (error) {
  parseError = "parse error: " + oneLine(error);
}
emit({ ready: true }); // the first render's clock starts here
for (const context of request.contexts) {
  if (template === null) {
    emit({ error: parseError });
    continue;
  }
  try {
    const text = template.render(context);
    emit(typeof text === "string" ? { text } : { error: `TypeError: render returned ${typeof text}` });
  } catch (error) {
    emit({ error: oneLine(error) });
  }
}
