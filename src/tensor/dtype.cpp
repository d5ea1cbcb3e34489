#include "tensor/dtype.h"

#include <algorithm>
#include <cctype>

#include "tensor/blocks.h"
#include "util/error.h"

namespace pagellm {

namespace {
const DTypeTraits kTraits[] = {
    {DType::F32, "f32", 1, 4, false, true},
    {DType::F16, "f16", 1, 2, false, true},
    {DType::BF16, "bf16", 1, 2, false, true},
    {DType::Q4_0, "q4_0", QK4_0, sizeof(BlockQ4_0), true, true},
    {DType::Q4_1, "q4_1", QK4_1, sizeof(BlockQ4_1), true, true},
    {DType::Q5_0, "q5_0", QK5_0, sizeof(BlockQ5_0), true, true},
    {DType::Q5_1, "q5_1", QK5_1, sizeof(BlockQ5_1), true, true},
    {DType::Q8_0, "q8_0", QK8_0, sizeof(BlockQ8_0), true, true},
    {DType::Q8_1, "q8_1", QK8_1, sizeof(BlockQ8_1), true, true},
    {DType::Q2_K, "q2_k", QK_K, sizeof(BlockQ2_K), true, true},
    {DType::Q3_K, "q3_k", QK_K, sizeof(BlockQ3_K), true, true},
    {DType::Q4_K, "q4_k", QK_K, sizeof(BlockQ4_K), true, true},
    {DType::Q5_K, "q5_k", QK_K, sizeof(BlockQ5_K), true, true},
    {DType::Q6_K, "q6_k", QK_K, sizeof(BlockQ6_K), true, true},
    {DType::Q8_K, "q8_k", QK_K, sizeof(BlockQ8_K), true, true},
    {DType::IQ4_NL, "iq4_nl", QK4_NL, sizeof(BlockIQ4_NL), true, true},
    {DType::IQ4_XS, "iq4_xs", QK_K, sizeof(BlockIQ4_XS), true, true},
    {DType::MXFP4, "mxfp4", QK_MXFP4, sizeof(BlockMXFP4), true, true},
};
}  // namespace

std::optional<DTypeTraits> dtype_traits_of(uint32_t id) {
  for (const auto& t : kTraits)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> all = [] {
    std::vector<DType> v;
    for (const auto& t : kTraits) v.push_back(t.type);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return all;
}

const DTypeTraits& dtype_traits(DType t) {
  for (const auto& tr : kTraits)
    if (tr.type == t) return tr;
  throw Error("unknown tensor type id " + std::to_string(static_cast<uint32_t>(t)));
}

size_t dtype_alignment(DType t) {
  if (t == DType::MXFP4) return 1;  // 17-byte blocks of bytes
  return t == DType::F32 || t == DType::Q8_K ? 4 : 2;
}

size_t dtype_row_bytes(DType t, int64_t n) {
  const auto& tr = dtype_traits(t);
  return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

DType parse_dtype(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& t : kTraits)
    if (lower == t.name) return t.type;
  std::string expected;
  for (const auto& t : kTraits) expected += std::string(expected.empty() ? "" : ", ") + t.name;
  throw ConfigError("unknown tensor type '" + std::string(name) + "' (expected one of " + expected +
                    ")");
}

}  // namespace pagellm
