// chatjinja's driver for llama.cpp's C++ Jinja engine (common/jinja/, built from the llama-cpp-python sdist).
//
// stdin: one JSON object {"source": TEMPLATE, "contexts": [CONTEXT, ...]}; stdout: {"ready": true} once
// the template is parsed, then one JSON line per context, in order, flushed as each finishes:
// {"text": OUTPUT} or {"error": ONE_LINE}.
// Each context is what llama-server's common_chat_template_direct_apply hands the engine
// (jinja::global_from_json on a fresh jinja::context, then jinja::runtime::execute and
// gather_string_parts), with the variables given instead of llama-server's own.
#include "json.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/value.h"

#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

// the engine's messages span several lines (a dashed rule, "While executing X at line L, column C ...",
// a source excerpt with a caret, then "Error: ..."): the last line, then where it happened
static std::string one_line(const std::string & message) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start <= message.size()) {
        size_t end = message.find('\n', start);
        if (end == std::string::npos) {
            end = message.size();
        }
        std::string line = message.substr(start, end - start);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
            line.pop_back();
        }
        if (!line.empty()) {
            lines.push_back(line);
        }
        start = end + 1;
    }
    std::string result = lines.empty() ? std::string("error") : lines.back();
    for (const auto & line : lines) {
        if (line.rfind("While executing", 0) == 0 && line != result) {
            size_t cut = line.find(" in source");
            result += " (" + line.substr(0, cut) + ")";
            break;
        }
    }
    if (result.size() > 300) {
        result.resize(300);
    }
    return result;
}

static void emit(const char * key, const std::string & value) {
    common_json line = common_json::object();
    line[key] = value;
    std::string out = line.dump_safe();
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

int main() {
    std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    common_json request;
    try {
        request = common_json::parse(input);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "bad request: %s\n", e.what());
        return 2;
    }
    const std::string source = request.at("source");
    const common_json & contexts = request.at("contexts");

    std::unique_ptr<jinja::program> program;
    std::string parse_error;
    try {
        jinja::lexer lexer;
        auto tokens = lexer.tokenize(source);
        program = std::make_unique<jinja::program>(jinja::parse_from_tokens(tokens));
    } catch (const std::exception & e) {
        parse_error = one_line(std::string("parse error: ") + e.what());
    }
    std::fputs("{\"ready\": true}\n", stdout);  // the first render's clock starts here
    std::fflush(stdout);

    for (size_t i = 0; i < contexts.size(); i++) {
        if (!program) {
            emit("error", parse_error);
            continue;
        }
        try {
            jinja::context ctx(source);
            jinja::global_from_json(ctx, contexts.at(i), false);
            jinja::runtime runtime(ctx);
            const jinja::value results = runtime.execute(*program);
            auto parts = jinja::runtime::gather_string_parts(results);
            emit("text", parts->as_string().str());
        } catch (const std::exception & e) {
            emit("error", one_line(e.what()));
        }
    }
    return 0;
}
