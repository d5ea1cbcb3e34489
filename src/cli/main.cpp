// pagellm: command-line entry point.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <map>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"pagellm: LLM inference with PagedAttention"};
  app.require_subcommand(1);
  std::map<CLI::App*, pagellm::cli::Runner> runners;
  auto add = [&](pagellm::cli::Runner (*fn)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    pagellm::cli::Runner r = fn(app);
    runners[app.get_subcommands({})[before]] = std::move(r);
  };
  add(pagellm::cli::add_generate);
  add(pagellm::cli::add_inspect);
  add(pagellm::cli::add_make_model);
  add(pagellm::cli::add_bench);
  add(pagellm::cli::add_chat);
  add(pagellm::cli::add_tokenize);
  add(pagellm::cli::add_plan);
  add(pagellm::cli::add_perplexity);
  add(pagellm::cli::add_serve);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const pagellm::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 1;
}
