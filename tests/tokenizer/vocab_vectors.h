// Reading the test vectors in tests/data/tokenizer-vectors (format in that
// folder's README): X.gguf.inp holds strings, each followed by
// "\n__ggml_vocab_test__\n"; X.gguf.out one line " id id ..." per string.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace pagellm::test {

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

// The cases of tokenizer-vectors/<gguf>.inp/.out. Throws std::runtime_error
// for a malformed pair.
inline std::vector<VectorCase> load_vectors(const std::string& gguf) {
  const std::string base = data_path("tokenizer-vectors/" + gguf);
  const std::string inp = read_file(base + ".inp");
  const std::string out = read_file(base + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VectorCase> cases;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(sep, pos);
    if (end == std::string::npos) throw std::runtime_error(gguf + ".inp: unterminated input");
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream lines(out);
  size_t i = 0;
  for (std::string line; std::getline(lines, line); ++i) {
    if (i >= cases.size()) throw std::runtime_error(gguf + ".out: more lines than inputs");
    std::istringstream nums(line);
    for (int32_t id; nums >> id;) cases[i].ids.push_back(id);
  }
  if (i != cases.size()) throw std::runtime_error(gguf + ".out: fewer lines than inputs");
  return cases;
}

}  // namespace pagellm::test
