// Every string of up to `max_len` bytes over {a, b, c}, shortest first: the
// inputs the grammar tests compare the matcher with a reference on.
#pragma once

#include <string>
#include <vector>

namespace pagellm {

inline std::vector<std::string> strings_over_abc(int max_len) {
  std::vector<std::string> out = {""};
  for (size_t from = 0; from < out.size(); ++from) {
    if (static_cast<int>(out[from].size()) == max_len) continue;
    for (char c : {'a', 'b', 'c'}) out.push_back(out[from] + c);
  }
  return out;
}

}  // namespace pagellm
