// Test weights and activations for the CPU kernel tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/activation_quant.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/packed_weights.h"
#include "tensor/blocks.h"
#include "tensor/convert.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"

namespace pagellm::test {

// Every weight type with a CPU dot product.
inline const std::vector<DType>& dot_weight_types() {
  static const std::vector<DType> types = {DType::F32,  DType::F16,    DType::BF16,  DType::Q4_0,
                                           DType::Q4_1, DType::Q5_0,   DType::Q5_1,  DType::Q8_0,
                                           DType::Q2_K, DType::Q3_K,   DType::Q4_K,  DType::Q5_K,
                                           DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS,
                                           DType::MXFP4};
  return types;
}

inline std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

enum class WeightFill {
  Quantized,    // quantize_row of Gaussian floats (realistic blocks)
  RandomBytes,  // random bits in every code field, random finite f16 scales
};

struct TestWeights {
  DType type;
  int64_t n = 0, rows = 0;
  size_t stride = 0;  // bytes between rows
  std::vector<uint8_t> bytes;
  const uint8_t* row(int64_t r) const { return bytes.data() + static_cast<size_t>(r) * stride; }
};

namespace detail_ {
inline void put_f16(uint8_t* p, float v) {
  f16_t h = fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}
// Overwrites the f16 scale fields of a block filled with random bytes.
inline void fix_scales(DType t, uint8_t* blk, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(-0.02f, 0.02f), m(0.0f, 0.02f);
  switch (t) {
    case DType::Q4_0:
      put_f16(blk + offsetof(BlockQ4_0, d), d(rng));
      break;
    case DType::Q5_0:
      put_f16(blk + offsetof(BlockQ5_0, d), d(rng));
      break;
    case DType::Q8_0:
      put_f16(blk + offsetof(BlockQ8_0, d), d(rng));
      break;
    case DType::Q4_1:
      put_f16(blk + offsetof(BlockQ4_1, d), d(rng));
      put_f16(blk + offsetof(BlockQ4_1, m), -m(rng));
      break;
    case DType::Q5_1:
      put_f16(blk + offsetof(BlockQ5_1, d), d(rng));
      put_f16(blk + offsetof(BlockQ5_1, m), -m(rng));
      break;
    case DType::Q2_K:
      put_f16(blk + offsetof(BlockQ2_K, d), d(rng));
      put_f16(blk + offsetof(BlockQ2_K, dmin), m(rng));
      break;
    case DType::Q3_K:
      put_f16(blk + offsetof(BlockQ3_K, d), d(rng));
      break;
    case DType::Q4_K:
      put_f16(blk + offsetof(BlockQ4_K, d), d(rng));
      put_f16(blk + offsetof(BlockQ4_K, dmin), m(rng));
      break;
    case DType::Q5_K:
      put_f16(blk + offsetof(BlockQ5_K, d), d(rng));
      put_f16(blk + offsetof(BlockQ5_K, dmin), m(rng));
      break;
    case DType::Q6_K:
      put_f16(blk + offsetof(BlockQ6_K, d), d(rng));
      break;
    case DType::IQ4_NL:
      put_f16(blk + offsetof(BlockIQ4_NL, d), d(rng));
      break;
    case DType::IQ4_XS:
      put_f16(blk + offsetof(BlockIQ4_XS, d), d(rng));
      break;
    case DType::MXFP4:  // scales 2^-12 .. 2^-6: values up to 6 * 2^-6 ~ 0.09
      blk[offsetof(BlockMXFP4, e)] = static_cast<uint8_t>(115 + rng() % 7);
      break;
    default:
      break;
  }
}
}  // namespace detail_

// `rows` rows of n elements; `pad` extra bytes between rows (filled with 0xAB).
inline TestWeights make_weights(DType t, int64_t rows, int64_t n, uint64_t seed, WeightFill fill,
                                size_t pad = 0) {
  TestWeights w;
  w.type = t;
  w.n = n;
  w.rows = rows;
  const size_t row_bytes = dtype_row_bytes(t, n);
  w.stride = row_bytes + pad;
  w.bytes.assign(w.stride * static_cast<size_t>(rows), 0xAB);
  std::mt19937_64 rng(seed);
  const auto& tr = dtype_traits(t);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* dst = w.bytes.data() + static_cast<size_t>(r) * w.stride;
    if (fill == WeightFill::Quantized || !tr.is_quantized) {
      auto v = random_floats(static_cast<size_t>(n), rng(), 0.05f);
      quantize_row(t, v.data(), dst, n);
    } else {
      for (size_t i = 0; i < row_bytes; ++i) dst[i] = static_cast<uint8_t>(rng());
      for (int64_t b = 0; b < n / tr.block_size; ++b)
        detail_::fix_scales(t, dst + static_cast<size_t>(b) * tr.type_size, rng);
    }
  }
  return w;
}

// Values of a row (weights or activations) in double.
inline std::vector<double> dequant(DType t, const void* p, int64_t n) {
  std::vector<float> f(static_cast<size_t>(n));
  dequantize_row(t, p, f.data(), n);
  return {f.begin(), f.end()};
}

// Activation rows in the dot type of `wtype`, each `stride` bytes apart.
struct TestActivations {
  std::vector<float> x;  // rows x n, the original floats
  size_t stride = 0;
  std::vector<uint8_t> bytes;
  const uint8_t* row(int64_t r) const { return bytes.data() + static_cast<size_t>(r) * stride; }
};

inline TestActivations make_activations(DType wtype, int64_t rows, int64_t n, uint64_t seed) {
  TestActivations a;
  a.x = random_floats(static_cast<size_t>(rows * n), seed);
  a.stride = cpu::activation_row_bytes(wtype, n) + 8;
  a.bytes.assign(a.stride * static_cast<size_t>(rows), 0xCD);
  for (int64_t r = 0; r < rows; ++r)
    cpu::quantize_activation_row(wtype, a.x.data() + r * n, a.bytes.data() + r * a.stride, n);
  return a;
}

// Weights repacked into the Rows16 layout (packed_weights.h), 64-byte aligned.
struct Packed {
  DType type;
  int64_t n_in, n_out;
  std::unique_ptr<uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
  cpu::WeightMatrix view() const {
    return {type,
            n_in,
            n_out,
            bytes.get(),
            cpu::packed_group_bytes(type, n_in),
            cpu::WeightLayout::Rows16};
  }
};

inline Packed pack(const TestWeights& w) {
  Packed p{w.type, w.n, w.rows};
  const size_t bytes = cpu::packed_bytes(w.type, w.n, w.rows);
  p.bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) & ~size_t{63})));
  cpu::pack_rows16(w.type, w.n, w.rows, w.bytes.data(), w.stride, p.bytes.get());
  return p;
}

}  // namespace pagellm::test
