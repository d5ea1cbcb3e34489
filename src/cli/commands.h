// The `pagellm` subcommands. Each registers its options on the CLI11 app and
// returns the function that runs it (exit code).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace pagellm::cli {

using Runner = std::function<int()>;

Runner add_generate(CLI::App& app);
Runner add_inspect(CLI::App& app);
Runner add_make_model(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_chat(CLI::App& app);
Runner add_tokenize(CLI::App& app);
Runner add_plan(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_perplexity(CLI::App& app);

// The model shipped in the repo (tests/data/stories260K.gguf).
std::string default_model_path();

}  // namespace pagellm::cli
