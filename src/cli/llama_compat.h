// llama.cpp's flags that people paste into pagellm command lines. Those that
// mean the same here are plain aliases of ours (registered where ours are:
// -c, -b/--batch-size, --parallel/-np, -ctk/-ctv, --mlock, --no-mmap, ...);
// those with no meaning here (-fa, -ub, --jinja, -ngl N) are accepted and
// print one `note:` line on stderr, after the command line parsed, and the
// command goes on. -ngl 0 keeps every layer off the GPUs.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace pagellm {
class GgufFile;
class Vocab;
}  // namespace pagellm

namespace pagellm::cli {

struct PlanOptions;

// Queues `text` as a "note: TEXT" line (once, however often it is queued).
void add_usage_note(const std::string& text);
// The queued notes, in order; empties the queue.
std::vector<std::string> take_usage_notes();

// -ngl/--n-gpu-layers/--gpu-layers, -fa/--flash-attn, -ub/--ubatch-size on a
// command that plans memory (PlanOptions::add_to calls it).
void add_llama_plan_flags(CLI::App& sub, PlanOptions& plan);

// --jinja / --no-jinja. `applies_templates`: the command renders chat
// templates (chat, serve), and --no-jinja sets `no_jinja`; else (generate)
// both only note that no template is applied.
void add_jinja_flags(CLI::App& sub, bool& no_jinja, bool applies_templates);

// --no-jinja: the built-in template for the model's family (detected from
// its own template's markers, else its special tokens; chatml if neither),
// which replaces the model's own Jinja template as llama.cpp's built-in
// formats do. Prints a note naming it.
std::string no_jinja_template(const GgufFile& file, const Vocab& vocab);

}  // namespace pagellm::cli
