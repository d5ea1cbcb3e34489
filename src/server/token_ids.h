// Token ids a client sends (prompts as ids, embedding inputs, detokenize):
// one check against the vocabulary, one error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagellm {

// The ids as the engine takes them. Throws ApiError 400 "invalid_token_id"
// naming `param` for an id outside 0..n_vocab-1.
std::vector<int32_t> checked_token_ids(const std::vector<int64_t>& ids, int32_t n_vocab,
                                       const std::string& param);

}  // namespace pagellm
