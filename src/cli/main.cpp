// pagellm: command-line entry point.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/llama_compat.h"
#include "cli/usage_errors.h"
#include "cli/version.h"
#include "mpi/mpi_pipeline.h"
#include "util/error.h"

namespace {
int run_main(int argc, char** argv);
}

int main(int argc, char** argv) {
  // Under mpirun/srun every rank runs this; rank 0 is the one the user sees.
  pagellm::mpi_start(&argc, &argv);
  const int code = run_main(argc, argv);
  if (pagellm::mpi_size() > 1) pagellm::mpi_exit(code);
  return code;
}

namespace {

int run_main(int argc, char** argv) {
  CLI::App app{"pagellm: LLM inference with PagedAttention"};
  app.set_version_flag("--version", pagellm::cli::version_line(), "Print the version and build");
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
  if (const char* hint = pagellm::cli::foreign_flag_hint(argc, argv)) {
    std::fprintf(stderr, "error: %s\n", hint);
    return 1;
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  if (const std::string err = pagellm::cli::translate_aliases(args); !err.empty()) {
    std::fprintf(stderr, "error: %s\n", err.c_str());
    return 1;
  }
  std::vector<char*> av = {argv[0]};
  for (std::string& a : args) av.push_back(a.data());
  try {
    app.parse(static_cast<int>(av.size()), av.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version print and exit 0; every usage error is one line.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string msg = pagellm::cli::one_line(e.what());
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) msg = pagellm::cli::extras_in_order(msg);
    std::fprintf(stderr, "error: %s (see --help)\n", msg.c_str());
    return 1;
  }
  // llama.cpp flags that change nothing here: one line each, then the command.
  for (const std::string& note : pagellm::cli::take_usage_notes())
    if (pagellm::mpi_rank() == 0) std::fprintf(stderr, "note: %s\n", note.c_str());
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const pagellm::Error& e) {
    // Under MPI every rank meets the same refusal: rank 0 says it.
    if (pagellm::mpi_rank() == 0) std::fprintf(stderr, "error: %s\n", e.what());
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

}  // namespace
