// Helpers for the tensor-format tests.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/blocks.h"
#include "tensor/convert.h"
#include "tensor/dtype.h"

namespace pagellm::test {

// f16 bit patterns of exactly representable values used in hand-built blocks.
constexpr f16_t kHalfZero = 0x0000;
constexpr f16_t kHalfOne = 0x3c00;             // 1.0
constexpr f16_t kHalfHalf = 0x3800;            // 0.5
constexpr f16_t kHalfQuarter = 0x3400;         // 0.25
constexpr f16_t kHalfEighth = 0x3000;          // 0.125
constexpr f16_t kHalfOneAndHalf = 0x3e00;      // 1.5
constexpr f16_t kHalfTwo = 0x4000;             // 2.0
constexpr f16_t kHalfTen = 0x4900;             // 10.0
constexpr f16_t kHalfMinusOne = 0xbc00;        // -1.0
constexpr f16_t kHalfMinusHalf = 0xb800;       // -0.5
constexpr f16_t kHalfMinusQuarter = 0xb400;    // -0.25
constexpr f16_t kHalfMinusSixteenth = 0xac00;  // -0.0625
constexpr f16_t kHalfMinusTwo = 0xc000;        // -2.0
constexpr f16_t kHalfMinusThree = 0xc200;      // -3.0
constexpr f16_t kHalfMinusEight = 0xc800;      // -8.0

// Decodes n elements of `type` from raw blocks.
template <class Block>
std::vector<float> decode(DType type, const std::vector<Block>& blocks) {
  const int64_t n = static_cast<int64_t>(blocks.size()) * dtype_block_size(type);
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(type, blocks.data(), out.data(), n);
  return out;
}

// Encodes x as `type` and returns the raw bytes.
inline std::vector<uint8_t> encode(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> out(dtype_row_bytes(type, static_cast<int64_t>(x.size())));
  quantize_row(type, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

inline std::vector<float> decode_bytes(DType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(type, bytes.data(), out.data(), n);
  return out;
}

}  // namespace pagellm::test
