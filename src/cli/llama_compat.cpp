#include "cli/llama_compat.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/cli_checks.h"
#include "cli/plan_options.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/chat_template.h"

namespace pagellm::cli {

namespace {

std::vector<std::string>& notes() {
  static std::vector<std::string> queued;
  return queued;
}

}  // namespace

void add_usage_note(const std::string& text) {
  auto& q = notes();
  if (std::find(q.begin(), q.end(), text) == q.end()) q.push_back(text);
}

std::vector<std::string> take_usage_notes() {
  std::vector<std::string> out;
  out.swap(notes());
  return out;
}

void add_llama_plan_flags(CLI::App& sub, PlanOptions& plan) {
  sub.add_option_function<std::string>(
         "--n-gpu-layers,--gpu-layers",
         [&plan](const std::string& v) {
           if (v == "0") {
             plan.no_gpu_layers = true;
             add_usage_note("-ngl 0: no layers on a GPU; everything runs on the host CPU");
           } else {
             add_usage_note(fmt::format(
                 "-ngl {}: layers are placed automatically (the KV cache first, then as many "
                 "layers as fit on the GPUs); `pagellm plan` shows where, --device-map places "
                 "them by hand",
                 v));
           }
         },
         "llama.cpp's -ngl (accepted: placement is automatic here, see `pagellm plan` and "
         "--device-map); -ngl 0 keeps every layer off the GPUs")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "auto" || v == "all") return "";
            if (!v.empty() && v.size() < 10 &&
                std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
              return "";
            if (v == "-1") return "";  // llama.cpp's "all"
            return "must be a layer count (or auto, all), got '" + v + "'";
          },
          "N|auto|all"))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub.add_option_function<std::string>(
         "--flash-attn",
         [](const std::string& v) {
           const bool off = v == "off" || v == "0" || v == "false" || v == "disabled";
           add_usage_note(off ? "-fa off: attention here is always paged and fused (one kernel "
                                "reads K and V block by block); it cannot be turned off"
                              : "-fa: attention here is always paged and fused (one kernel reads "
                                "K and V block by block); there is nothing to switch on");
         },
         "llama.cpp's -fa [on|off|auto] (accepted: paged attention is always fused here)")
      ->expected(0, 1)
      ->default_str("on")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->check(CLI::IsMember({"on", "off", "auto", "1", "0", "true", "false", "enabled",
                             "disabled"}));
  sub.add_option_function<int64_t>(
         "--ubatch-size",
         [](const int64_t&) {
           add_usage_note("-ub: a step runs its tokens (up to --max-batched-tokens, llama.cpp's "
                          "-b) as one batch here; there is no separate micro-batch size");
         },
         "llama.cpp's -ub (accepted: no separate micro-batch here; -b sets the step size)")
      ->check(above(0))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void add_jinja_flags(CLI::App& sub, bool& no_jinja, bool applies_templates) {
  auto* on = sub.add_flag_callback(
      "--jinja",
      [applies_templates] {
        add_usage_note(applies_templates
                           ? "--jinja: chat templates always run on pagellm's Jinja engine"
                           : "--jinja: generate applies no chat template (`pagellm chat` does, "
                             "always with Jinja)");
      },
      "llama.cpp's --jinja (accepted: templates always run on the Jinja engine)");
  if (applies_templates) {
    sub.add_flag("--no-jinja", no_jinja,
                 "Use the built-in template for the model's family (chatml, llama3, ...) "
                 "instead of the model's own")
        ->excludes(on);
  } else {
    sub.add_flag_callback(
           "--no-jinja",
           [] { add_usage_note("--no-jinja: generate applies no chat template"); },
           "llama.cpp's --no-jinja (accepted: generate applies no chat template)")
        ->excludes(on);
  }
}

std::string no_jinja_template(const GgufFile& file, const Vocab& vocab) {
  std::optional<std::string_view> family;
  if (const auto own = chat_template_from_gguf(file)) family = detect_chat_template_family(*own);
  if (!family) family = detect_chat_template_family(vocab);
  const std::string name(family.value_or("chatml"));
  std::fprintf(stderr, "note: --no-jinja: using the built-in '%s' template (%s), not the "
               "model's own\n", name.c_str(), family ? "the model's family" : "no family found");
  return name;
}

}  // namespace pagellm::cli
