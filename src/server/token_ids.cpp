#include "server/token_ids.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace pagellm {

std::vector<int32_t> checked_token_ids(const std::vector<int64_t>& ids, int32_t n_vocab,
                                       const std::string& param) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= n_vocab)
      throw ApiError(400, fmt::format("token id {} is outside the vocabulary (0..{})", id, n_vocab - 1),
                     "invalid_request_error", param, "invalid_token_id");
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

}  // namespace pagellm
