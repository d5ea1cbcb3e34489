#include "cli/usage_errors.h"

#include <cctype>
#include <cstring>

namespace pagellm::cli {

std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c));
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string extras_in_order(const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return message;
  std::vector<std::string> words;
  size_t i = colon + 2;
  while (i < message.size()) {
    const size_t sp = message.find(' ', i);
    words.push_back(message.substr(i, sp == std::string::npos ? std::string::npos : sp - i));
    if (sp == std::string::npos) break;
    i = sp + 1;
  }
  std::string out = message.substr(0, colon + 2);
  for (auto it = words.rbegin(); it != words.rend(); ++it)
    out += (it == words.rbegin() ? "" : " ") + *it;
  return out;
}

namespace {

struct Hint {
  const char* flags[3];
  const char* text;
};

// Flags whose work pagellm cannot do (those with nothing to do here are
// accepted with a note: cli/llama_compat.h).
constexpr Hint kHints[] = {
    {{"-hf", "--hf-repo", "-hfr"},
     "-hf: pagellm does not download models; pass a GGUF file with -m FILE"},
};

}  // namespace

const char* foreign_flag_hint(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    for (const Hint& h : kHints)
      for (const char* f : h.flags)
        if (f && std::strcmp(argv[i], f) == 0) return h.text;
  return nullptr;
}

std::string translate_aliases(std::vector<std::string>& args) {
  std::vector<std::string> out;
  std::string kv_type;  // from -ctk / -ctv
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-np") {
      out.push_back("--max-num-seqs");
    } else if (a == "-ngl") {
      out.push_back("--n-gpu-layers");
    } else if (a == "-fa") {
      out.push_back("--flash-attn");
    } else if (a == "-ub") {
      out.push_back("--ubatch-size");
    } else if (a == "-sys") {
      out.push_back("--system");
    } else if (a == "-ctk" || a == "-ctv") {
      if (i + 1 >= args.size()) return a + " needs a KV cache type (f16, f32 or q8_0)";
      const std::string& t = args[++i];
      if (!kv_type.empty() && t != kv_type)
        return "-ctk and -ctv must name the same type: one KV cache type holds K and V "
               "(--kv-type)";
      if (kv_type.empty()) {
        out.push_back("--kv-type");
        out.push_back(t);
      }
      kv_type = t;
    } else {
      out.push_back(a);
    }
  }
  args = std::move(out);
  return {};
}

}  // namespace pagellm::cli
