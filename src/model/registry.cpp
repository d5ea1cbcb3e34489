#include "model/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>

#include "util/error.h"

// Each family file defines make_<name>(); one line here registers it.
#define PAGELLM_ARCHITECTURES(X) \
  X(llama)                       \
  X(qwen2)                       \
  X(qwen3)                       \
  X(qwen3moe)                    \
  X(gemma2)                      \
  X(gemma3)                      \
  X(gemma4)                      \
  X(phi3)                        \
  X(olmo2)                       \
  X(smollm3)                     \
  X(qwen35)                       \
  X(qwen35moe)                    \
  X(deepseek2)                    \
  X(gpt_oss)

namespace pagellm {

#define PAGELLM_DECLARE(name) std::unique_ptr<Architecture> make_##name();
PAGELLM_ARCHITECTURES(PAGELLM_DECLARE)
#undef PAGELLM_DECLARE

namespace {

const std::vector<std::unique_ptr<Architecture>>& registry() {
  static const std::vector<std::unique_ptr<Architecture>> all = [] {
    std::vector<std::unique_ptr<Architecture>> v;
#define PAGELLM_MAKE(name) v.push_back(make_##name());
    PAGELLM_ARCHITECTURES(PAGELLM_MAKE)
#undef PAGELLM_MAKE
    return v;
  }();
  return all;
}

}  // namespace

const Architecture* lookup_architecture(const std::string& name) {
  for (const auto& a : registry())
    if (name == a->name()) return a.get();
  return nullptr;
}

const Architecture& find_architecture(const std::string& name, const std::string& path) {
  if (const Architecture* a = lookup_architecture(name)) return *a;
  throw FormatError(fmt::format("{}: architecture '{}' is not supported (supported: {})", path, name,
                                fmt::join(architecture_names(), ", ")));
}

std::vector<std::string> architecture_names() {
  std::vector<std::string> names;
  for (const auto& a : registry()) names.emplace_back(a->name());
  return names;
}

}  // namespace pagellm
