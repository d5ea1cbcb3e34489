// Usage errors as one line: CLI11's messages flattened, and hints for flags
// that people bring from llama.cpp and that mean nothing here.
#pragma once

#include <string>
#include <vector>

namespace pagellm::cli {

// `text` with its line breaks and runs of spaces as single spaces.
std::string one_line(const std::string& text);

// CLI11 lists unexpected arguments last to first ("...expected: 2 --top-p"):
// the same message with them in command-line order.
std::string extras_in_order(const std::string& message);

// For a llama.cpp flag whose work pagellm cannot do (-hf: downloads): a
// one-line hint of what to do instead; nullptr when argv has none.
const char* foreign_flag_hint(int argc, char** argv);

// llama.cpp's multi-letter single-dash spellings (CLI11 reads "-np" as -n -p)
// rewritten to ours: -np -> --max-num-seqs, -ctk / -ctv -> --kv-type (one
// type for K and V: they must agree), -sys -> --system, and -ngl, -fa, -ub to
// their long names (cli/llama_compat.h). Returns an error message, empty
// when fine.
std::string translate_aliases(std::vector<std::string>& args);

}  // namespace pagellm::cli
