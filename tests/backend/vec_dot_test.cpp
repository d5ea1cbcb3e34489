#include "backend/cpu/vec_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/activation_quant.h"
#include "backend/kernel_test_util.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "util/error.h"

namespace pagellm::cpu {
namespace {

using test::dot_weight_types;
using test::make_activations;
using test::make_weights;
using test::WeightFill;

std::string label(DType t, CpuIsa isa, int64_t n, WeightFill f) {
  return std::string(dtype_name(t)) + "/" + isa_name(isa) + " n=" + std::to_string(n) +
         (f == WeightFill::RandomBytes ? " random-bytes" : " quantized");
}

// Row lengths covering one block, several blocks, and (float types) tails.
std::vector<int64_t> lengths(DType t) {
  if (!dtype_traits(t).is_quantized) return {1, 7, 16, 33, 256, 1000};
  if (dtype_block_size(t) == 32) return {32, 96, 1024};
  return {256, 768, 2048};
}

// Every variant against double-precision dot products of the dequantized
// weights with (a) the dequantized activations, tightly, and (b) the original
// float activations, within the activation rounding bound.
TEST(VecDot, MatchesDequantizedReference) {
  for (DType t : dot_weight_types()) {
    const DType at = dot_type(t);
    for (WeightFill fill : {WeightFill::Quantized, WeightFill::RandomBytes}) {
      for (int64_t n : lengths(t)) {
        const int64_t rows = 5;
        // Rows off 4- and 32-byte alignment, but 2-byte aligned as in any GGUF
        // file (blocks hold f16 fields; GgufFile rejects misaligned tensors).
        auto w = make_weights(t, rows, n, 11 * n + 1, fill, /*pad=*/6);
        auto a = make_activations(t, 1, n, 5 * n + 2);
        const auto xq = test::dequant(at, a.row(0), n);
        // Per-element activation rounding bound: half the block's step.
        std::vector<double> half_step(n, 0.0);
        if (at != DType::F32) {
          const int64_t bs = dtype_block_size(at);
          const size_t bb = dtype_type_size(at);
          for (int64_t i = 0; i < n; ++i) {
            const uint8_t* blk = a.row(0) + (i / bs) * bb;
            float d;
            if (at == DType::Q8_K) {
              std::memcpy(&d, blk, 4);
            } else {
              f16_t h;
              std::memcpy(&h, blk, 2);
              d = fp16_to_fp32(h);
            }
            half_step[i] = 0.5 * d * 1.001;
          }
        }
        for (CpuIsa isa : available_isas()) {
          std::vector<float> out(rows, -1.0f);
          vec_dot_rows(t, n, w.bytes.data(), w.stride, rows, a.row(0), out.data(), isa);
          for (int64_t r = 0; r < rows; ++r) {
            const auto wf = test::dequant(t, w.row(r), n);
            double ref_q = 0, ref_x = 0, mag = 0, bound = 0;
            for (int64_t i = 0; i < n; ++i) {
              ref_q += wf[i] * xq[i];
              ref_x += wf[i] * a.x[i];
              mag += std::fabs(wf[i] * xq[i]);
              bound += std::fabs(wf[i]) * half_step[i];
            }
            // Q8_1 carries s = d * sum(q) rounded to f16: the weights' m * s
            // terms are off by up to 2^-11 relative.
            double s_err = 0;
            if (at == DType::Q8_1) {
              for (int64_t b = 0; b < n / 32; ++b) {
                f16_t m, s;
                std::memcpy(&m, w.row(r) + b * dtype_type_size(t) + 2, 2);
                std::memcpy(&s, a.row(0) + b * sizeof(BlockQ8_1) + 2, 2);
                s_err += std::fabs(fp16_to_fp32(m) * fp16_to_fp32(s)) * 4.9e-4;
              }
            }
            const double tol = 1e-5 * mag + s_err + 1e-30;
            ASSERT_NEAR(out[r], ref_q, tol) << label(t, isa, n, fill) << " row " << r;
            ASSERT_NEAR(out[r], ref_x, bound + tol) << label(t, isa, n, fill) << " row " << r;
          }
        }
      }
    }
  }
}

// SIMD variants agree with the scalar reference to float rounding; AVX2 and
// AVX-512 agree bit for bit on the quantized types.
TEST(VecDot, VariantsAgree) {
  for (DType t : dot_weight_types()) {
    for (int64_t n : lengths(t)) {
      const int64_t rows = 9;
      auto w = make_weights(t, rows, n, 3 * n + 7, WeightFill::RandomBytes);
      auto a = make_activations(t, 1, n, n + 9);
      const auto xq = test::dequant(dot_type(t), a.row(0), n);
      std::vector<float> ref(rows);
      vec_dot_rows(t, n, w.bytes.data(), w.stride, rows, a.row(0), ref.data(), CpuIsa::Scalar);
      std::vector<std::vector<float>> got;
      for (CpuIsa isa : available_isas()) {
        std::vector<float> out(rows);
        vec_dot_rows(t, n, w.bytes.data(), w.stride, rows, a.row(0), out.data(), isa);
        for (int64_t r = 0; r < rows; ++r) {
          const auto wf = test::dequant(t, w.row(r), n);
          double mag = 0;
          for (int64_t i = 0; i < n; ++i) mag += std::fabs(wf[i] * xq[i]);
          ASSERT_NEAR(out[r], ref[r], 1e-5 * mag) << dtype_name(t) << " " << isa_name(isa);
        }
        got.push_back(out);
      }
      if (dtype_traits(t).is_quantized && isa_available(CpuIsa::Avx2) &&
          isa_available(CpuIsa::Avx512)) {
        std::vector<float> a2(rows), a5(rows);
        vec_dot_rows(t, n, w.bytes.data(), w.stride, rows, a.row(0), a2.data(), CpuIsa::Avx2);
        vec_dot_rows(t, n, w.bytes.data(), w.stride, rows, a.row(0), a5.data(), CpuIsa::Avx512);
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(fp32_to_bits(a2[r]), fp32_to_bits(a5[r])) << dtype_name(t) << " row " << r;
      }
    }
  }
}

// A (row, column) result is the same bits whether computed alone, in a tile of
// any shape, or at any position.
TEST(VecDot, TileIsBitIdenticalToSingleRows) {
  for (DType t : dot_weight_types()) {
    const int64_t n = dtype_traits(t).is_quantized ? 2 * dtype_block_size(t) : 45;
    const int64_t rows = 11, cols = 9;
    auto w = make_weights(t, rows, n, 99, WeightFill::RandomBytes, 2);
    auto a = make_activations(t, cols, n, 98);
    for (CpuIsa isa : available_isas()) {
      std::vector<float> single(rows * cols);
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r)
          vec_dot_rows(t, n, w.row(r), w.stride, 1, a.row(c), &single[c * rows + r], isa);
      for (int64_t r0 : {0, 1, 3}) {
        for (int64_t c0 : {0, 2, 5, 7}) {
          const int64_t nr = rows - r0, nc = cols - c0;
          const int64_t os = nr + 2;
          std::vector<float> out(nc * os, -7.0f);
          vec_dot_tile(t, n, w.row(r0), w.stride, nr, a.row(c0), a.stride, nc, out.data(), os, isa);
          for (int64_t c = 0; c < nc; ++c) {
            for (int64_t r = 0; r < nr; ++r)
              ASSERT_EQ(fp32_to_bits(out[c * os + r]),
                        fp32_to_bits(single[(c0 + c) * rows + r0 + r]))
                  << dtype_name(t) << " " << isa_name(isa) << " r=" << r0 + r << " c=" << c0 + c;
            for (int64_t r = nr; r < os; ++r) ASSERT_EQ(out[c * os + r], -7.0f);  // untouched
          }
        }
      }
    }
  }
}

TEST(VecDot, Errors) {
  std::vector<uint8_t> buf(4096);
  float out;
  EXPECT_FALSE(dot_supported(DType::Q8_K));
  EXPECT_TRUE(dot_supported(DType::Q5_K));
  EXPECT_THROW(vec_dot_rows(DType::Q8_K, 256, buf.data(), 292, 1, buf.data(), &out), Error);
  EXPECT_THROW(vec_dot_rows(DType::Q4_K, 128, buf.data(), 72, 1, buf.data(), &out), Error);
}

}  // namespace
}  // namespace pagellm::cpu
