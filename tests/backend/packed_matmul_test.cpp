// Rows16 weights (packed_weights.h) and their matmul kernels.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/activation_quant.h"
#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/packed_weights.h"
#include "backend/kernel_test_util.h"
#include "backend/packed_contract.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/quant_internal.h"
#include "util/error.h"

namespace pagellm::cpu {
namespace {

using test::make_weights;
using test::pack;
using test::Packed;
using test::random_floats;
using test::WeightFill;

const DType kTypes[] = {DType::Q4_0, DType::Q4_1,   DType::Q5_0, DType::Q5_1,
                        DType::Q8_0, DType::IQ4_NL, DType::Q2_K, DType::Q3_K,
                        DType::Q4_K, DType::Q5_K,   DType::Q6_K, DType::IQ4_XS,
                        DType::MXFP4};
// The types with AMX kernels.
const DType kAmxTypes[] = {DType::Q4_0,   DType::Q4_1,   DType::Q5_0, DType::Q5_1,
                           DType::Q8_0,   DType::IQ4_NL, DType::IQ4_XS, DType::Q4_K,
                           DType::Q5_K,   DType::Q6_K,   DType::MXFP4};

// A row length for type t: `n` for the 32-blocks, a multiple of 256 for Q4_K.
int64_t len_for(DType t, int64_t n) {
  return dtype_block_size(t) == 256 ? (n + 255) / 256 * 256 : n;
}

TEST(PackedWeights, RoundTripsEveryRow) {
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL,
                  DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS,
                  DType::F16, DType::BF16, DType::MXFP4}) {
    for (int64_t n_out : {1, 16, 37}) {
      for (int64_t blocks : {3, 4}) {  // 32-element blocks go in pairs: an odd last one, or none
        const int64_t n = blocks * (dtype_block_size(t) == 256 ? 256 : 32);
        // Rows at odd offsets for the quantized types; float rows stay 2-byte aligned.
        const size_t pad = t == DType::F16 || t == DType::BF16 ? 6 : 5;
        auto w = make_weights(t, n_out, n, 3, WeightFill::RandomBytes, pad);
        Packed p = pack(w);
        std::vector<uint8_t> row(dtype_row_bytes(t, n));
        for (int64_t r = 0; r < n_out; ++r) {
          unpack_row16(t, n, p.bytes.get(), r, row.data());
          ASSERT_EQ(0, std::memcmp(row.data(), w.row(r), row.size()))
              << dtype_name(t) << " n_out " << n_out << " row " << r;
        }
      }
    }
  }
}

TEST(PackedWeights, RejectsOtherTypesAndLengths) {
  EXPECT_FALSE(packable(DType::Q8_1));
  EXPECT_FALSE(packable(DType::Q8_K));
  EXPECT_TRUE(packable(DType::Q4_1));
  EXPECT_TRUE(packable(DType::Q5_1));
  EXPECT_TRUE(packable(DType::Q5_0));
  EXPECT_TRUE(packable(DType::IQ4_NL));
  EXPECT_TRUE(packable(DType::IQ4_XS));
  EXPECT_TRUE(packable(DType::MXFP4));
  // MXFP4: 16 codes bytes and one exponent byte per row and block, as the file.
  EXPECT_EQ(packed_bytes(DType::MXFP4, 64, 16), size_t{16 * 2 * 17});
  EXPECT_EQ(packed_bytes(DType::MXFP4, 96, 17), size_t{2 * (16 * 3 * 17 + 16)});
  EXPECT_THROW(packed_bytes(DType::IQ4_XS, 96, 16), Error);
  EXPECT_THROW(packed_bytes(DType::Q5_0, 48, 16), Error);
  EXPECT_TRUE(packable(DType::Q2_K));
  EXPECT_TRUE(packable(DType::Q3_K));
  EXPECT_THROW(packed_bytes(DType::Q3_K, 128, 16), Error);
  EXPECT_TRUE(packable(DType::Q5_K));
  EXPECT_TRUE(packable(DType::Q4_K));
  EXPECT_THROW(packed_bytes(DType::Q4_K, 96, 16), Error);
  EXPECT_TRUE(packable(DType::Q4_0));
  EXPECT_THROW(packed_bytes(DType::F32, 64, 16), Error);
  EXPECT_THROW(packed_bytes(DType::F16, 48, 16), Error);
  EXPECT_EQ(packed_bytes(DType::BF16, 64, 17), size_t{2 * 2 * 1024});
  EXPECT_THROW(packed_bytes(DType::Q8_0, 40, 16), Error);
}

using packed_contract::contract;

std::vector<float> run(const Packed& p, const std::vector<float>& x, int64_t first, int64_t count,
                       int threads, CpuIsa isa) {
  ThreadPool pool(threads);
  MatmulScratch scratch;
  const int64_t ys = p.n_out + 3;
  std::vector<float> y(static_cast<size_t>(count * ys), -9.0f);
  matmul(p.view(), x.data() + first * p.n_in, p.n_in, count, y.data(), ys, pool, scratch, isa);
  std::vector<float> out(static_cast<size_t>(count * p.n_out));
  for (int64_t t = 0; t < count; ++t) {
    for (int64_t r = 0; r < p.n_out; ++r) out[t * p.n_out + r] = y[t * ys + r];
    for (int64_t r = p.n_out; r < ys; ++r) EXPECT_EQ(y[t * ys + r], -9.0f);  // untouched
  }
  return out;
}

// Every variant gives exactly the contract's value, for every output, with
// random codes and scales, a padded last group and T from 1 to 21 (every
// tile width of every variant: 1, 2, 3 and full tiles).
TEST(PackedMatmul, EveryVariantMatchesTheContractBitForBit) {
  for (DType t : kTypes) {
    const int64_t n = len_for(t, 160), n_out = 37, T = 21;
    auto w = make_weights(t, n_out, n, 11, WeightFill::RandomBytes, 4);
    Packed p = pack(w);
    auto x = random_floats(static_cast<size_t>(T * n), 12);
    const size_t xrow = activation_row_bytes(t, n);
    std::vector<uint8_t> xq(xrow * static_cast<size_t>(T));
    for (int64_t c = 0; c < T; ++c)
      quantize_activation_row(t, x.data() + c * n, xq.data() + c * xrow, n, CpuIsa::Scalar);
    auto expected = [&](int64_t r, int64_t c) {
      return contract(t, w.row(r), xq.data() + c * xrow, n);
    };
    for (CpuIsa isa : available_isas()) {
      for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{9}, T}) {
        auto y = run(p, x, 0, count, 2, isa);
        for (int64_t c = 0; c < count; ++c)
          for (int64_t r = 0; r < n_out; ++r) {
            const float e = expected(r, c);
            ASSERT_EQ(fp32_to_bits(y[c * n_out + r]), fp32_to_bits(e))
                << dtype_name(t) << " " << isa_name(isa) << " T=" << count << " col " << c
                << " row " << r;
          }
      }
    }
  }
}

// The code bytes of one block of type t: {offset, length} pairs.
std::vector<std::pair<size_t, size_t>> code_fields(DType t) {
  switch (t) {
    case DType::Q4_0:
      return {{offsetof(BlockQ4_0, qs), sizeof(BlockQ4_0::qs)}};
    case DType::Q4_1:
      return {{offsetof(BlockQ4_1, qs), sizeof(BlockQ4_1::qs)}};
    case DType::Q5_0:
      return {{offsetof(BlockQ5_0, qh), sizeof(BlockQ5_0::qh)},
              {offsetof(BlockQ5_0, qs), sizeof(BlockQ5_0::qs)}};
    case DType::Q5_1:
      return {{offsetof(BlockQ5_1, qh), sizeof(BlockQ5_1::qh)},
              {offsetof(BlockQ5_1, qs), sizeof(BlockQ5_1::qs)}};
    case DType::Q8_0:
      return {{offsetof(BlockQ8_0, qs), sizeof(BlockQ8_0::qs)}};
    case DType::IQ4_NL:
      return {{offsetof(BlockIQ4_NL, qs), sizeof(BlockIQ4_NL::qs)}};
    case DType::MXFP4:
      return {{offsetof(BlockMXFP4, qs), sizeof(BlockMXFP4::qs)}};
    case DType::IQ4_XS:
      return {{offsetof(BlockIQ4_XS, qs), sizeof(BlockIQ4_XS::qs)}};
    case DType::Q4_K:
      return {{offsetof(BlockQ4_K, qs), sizeof(BlockQ4_K::qs)}};
    case DType::Q5_K:
      return {{offsetof(BlockQ5_K, qh), sizeof(BlockQ5_K::qh)},
              {offsetof(BlockQ5_K, qs), sizeof(BlockQ5_K::qs)}};
    case DType::Q6_K:
      return {{offsetof(BlockQ6_K, ql), sizeof(BlockQ6_K::ql)},
              {offsetof(BlockQ6_K, qh), sizeof(BlockQ6_K::qh)}};
    case DType::Q2_K:
      return {{offsetof(BlockQ2_K, qs), sizeof(BlockQ2_K::qs)}};
    case DType::Q3_K:
      return {{offsetof(BlockQ3_K, hmask), sizeof(BlockQ3_K::hmask)},
              {offsetof(BlockQ3_K, qs), sizeof(BlockQ3_K::qs)}};
    default:
      return {};
  }
}

// Codes and activations at their extremes, where the kernels' integer sums
// are largest (the AVX2 kernels add maddubs pair sums in int16 while they
// fit: eight of Q4_0's, Q4_1's and Q4_K's, 8 * 2 * 15 * 127 = 30480; four of
// Q5_0's, Q5_1's and Q5_K's, 31496; two of Q6_K's, 32004; four of Q3_K's, 7112, and of Q2_K's,
// 3048; Q8_0's single pair sums reach 2 * 128 * 127): every variant still gives the contract's
// value, with activations all at +127, all at -127, and alternating.
TEST(PackedMatmul, ExtremeCodesAndActivationsMatchTheContract) {
  for (DType t : kTypes) {
    const int64_t n = 512, n_out = 24, T = 5;
    auto w = make_weights(t, n_out, n, 3, WeightFill::RandomBytes, 4);
    const size_t bb = dtype_row_bytes(t, dtype_block_size(t));  // bytes per block
    for (int64_t r = 0; r < n_out; ++r)
      for (int64_t b = 0; b < n / dtype_block_size(t); ++b)
        for (const auto& [off, len] : code_fields(t)) {
          uint8_t* codes = w.bytes.data() + static_cast<size_t>(r) * w.stride + b * bb + off;
          // All bits set: the largest code (Q8_0: -128); every third row the
          // smallest, and Q8_0's odd rows 127.
          const uint8_t v = r % 3 == 2 ? 0x00 : t == DType::Q8_0 && r % 2 ? 0x7F : 0xFF;
          std::memset(codes, t == DType::Q8_0 && v == 0xFF ? 0x80 : v, len);
          // MXFP4: exponents through the subnormal half scales (e = 0, 1) too.
          if (t == DType::MXFP4)
            codes[-1] = std::array<uint8_t, 5>{0, 1, 2, 127, 130}[(r + b) % 5];
        }
    const Packed p = pack(w);
    std::vector<float> x(static_cast<size_t>(T * n));
    for (int64_t c = 0; c < T; ++c)
      for (int64_t i = 0; i < n; ++i)
        x[c * n + i] = c == 0 ? 1.0f : c == 1 ? -1.0f : (i % 2 ? 2.0f : -2.0f) * (c - 1);
    const size_t xrow = activation_row_bytes(t, n);
    std::vector<uint8_t> xq(xrow * static_cast<size_t>(T));
    for (int64_t c = 0; c < T; ++c)
      quantize_activation_row(t, x.data() + c * n, xq.data() + c * xrow, n, CpuIsa::Scalar);
    for (CpuIsa isa : available_isas())
      for (int64_t count : {int64_t{1}, T}) {
        const auto y = run(p, x, 0, count, 1, isa);
        for (int64_t c = 0; c < count; ++c)
          for (int64_t r = 0; r < n_out; ++r)
            ASSERT_EQ(fp32_to_bits(y[c * n_out + r]),
                      fp32_to_bits(contract(t, w.row(r), xq.data() + c * xrow, n)))
                << dtype_name(t) << " " << isa_name(isa) << " T=" << count << " col " << c
                << " row " << r;
      }
  }
}

// The AMX kernels give exactly the contract's value: column tiles of 16, tails
// on tiles (5) and on VNNI (2, 3), more than one column chunk (70), an odd and
// an even block count (Q4_0 / Q8_0) or one and two super-blocks, a padded last
// group.
void check_amx_kernel(bool emulated) {
  ThreadPool pool(1);
  for (DType t : kAmxTypes) {
    const cpu::detail::PackedTileFn fn = cpu::detail::packed_amx_fn(t, emulated);
    ASSERT_NE(fn, nullptr) << dtype_name(t);
    for (int64_t blocks : {1, 3, 4}) {
      const int64_t n = blocks * (dtype_block_size(t) == 256 ? 256 : 32), n_out = 37;
      auto w = make_weights(t, n_out, n, 41, WeightFill::RandomBytes, 6);
      const Packed p = pack(w);
      for (int64_t T : {4, 5, 16, 18, 19, 21, 70}) {
        auto x = random_floats(static_cast<size_t>(T * n), 42 + T);
        MatmulScratch scratch;
        const ActivationRows a = quantize_activations(p.view(), x.data(), n, T, pool, scratch);
        const int64_t ys = n_out + 3;
        std::vector<float> y(static_cast<size_t>(T * ys), -9.0f);
        fn(n, p.bytes.get(), packed_group_bytes(t, n), n_out, static_cast<const uint8_t*>(a.data),
           a.row_stride, T, y.data(), ys);
        std::vector<uint8_t> xq(activation_row_bytes(t, n));
        for (int64_t c = 0; c < T; ++c) {
          quantize_activation_row(t, x.data() + c * n, xq.data(), n, CpuIsa::Scalar);
          for (int64_t r = 0; r < n_out; ++r) {
            const float e = contract(t, w.row(r), xq.data(), n);
            ASSERT_EQ(fp32_to_bits(y[c * ys + r]), fp32_to_bits(e))
                << dtype_name(t) << " blocks " << blocks << " T=" << T << " col " << c << " row "
                << r;
          }
          for (int64_t r = n_out; r < ys; ++r) ASSERT_EQ(y[c * ys + r], -9.0f);
        }
      }
    }
  }
}

TEST(PackedMatmul, AmxKernelOnTheTileModelMatchesTheContract) {
  if (!isa_available(CpuIsa::Avx512)) GTEST_SKIP() << "no AVX-512: the kernel's epilogue needs it";
  check_amx_kernel(true);
}

TEST(PackedMatmul, AmxKernelOnTheCpuTilesMatchesTheContract) {
  if (!amx_int8_available()) GTEST_SKIP() << "no AMX-INT8 on this CPU (or PAGELLM_CPU_AMX=0)";
  check_amx_kernel(false);
}

// F16 / BF16 Rows16 weights give the row-major kernels' bits in every variant
// (the same arithmetic, only the loads differ), with a padded last group, one
// to three column tiles and their tails, and more than one column chunk (70).
TEST(PackedMatmul, FloatRows16EqualsRowMajorBitForBit) {
  for (DType t : {DType::F16, DType::BF16}) {
    for (int64_t n : {96, 2048, 4128}) {  // 4128: one column takes the 4 quads at once
      const int64_t n_out = 37;
      const auto w = make_weights(t, n_out, n, 51, WeightFill::Quantized);
      const Packed p = pack(w);
      const WeightMatrix rm{t, n, n_out, w.bytes.data(), w.stride};
      auto x = random_floats(static_cast<size_t>(70 * n), 52);
      for (CpuIsa isa : available_isas()) {
        for (int64_t T : {1, 2, 3, 4, 5, 7, 70}) {
          ThreadPool pool(2);
          MatmulScratch s1, s2;
          std::vector<float> want(static_cast<size_t>(T * n_out)), got(want.size());
          matmul(rm, x.data(), n, T, want.data(), n_out, pool, s1, isa);
          matmul(p.view(), x.data(), n, T, got.data(), n_out, pool, s2, isa);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_EQ(fp32_to_bits(got[i]), fp32_to_bits(want[i]))
                << dtype_name(t) << " n " << n << " " << isa_name(isa) << " T=" << T << " at " << i;
        }
      }
    }
  }
}

// Close to the double-precision product of the dequantized weights and X.
TEST(PackedMatmul, CloseToDoubleReference) {
  ThreadPool pool(2);
  for (DType t : kTypes) {
    const int64_t n = len_for(t, 512), n_out = 48, T = 5;
    auto w = make_weights(t, n_out, n, 8, WeightFill::Quantized);
    Packed p = pack(w);
    auto x = random_floats(static_cast<size_t>(T * n), 9);
    auto y = run(p, x, 0, T, 2, best_isa());
    for (int64_t c = 0; c < T; ++c)
      for (int64_t r = 0; r < n_out; ++r) {
        const auto wf = test::dequant(t, w.row(r), n);
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
          ref += wf[i] * x[c * n + i];
          mag += std::fabs(wf[i] * x[c * n + i]);
        }
        ASSERT_NEAR(y[c * n_out + r], ref, 0.01 * mag) << dtype_name(t) << " row " << r;
      }
  }
}

// One output row is the same bit for bit alone, in a batch of 70 (more than
// one column chunk) and with 1 to 3 threads.
TEST(PackedMatmul, BatchInvariance) {
  for (DType t : kTypes) {
    const int64_t n = len_for(t, 256), n_out = 80, T = 70;
    auto w = make_weights(t, n_out, n, 21, WeightFill::Quantized);
    Packed p = pack(w);
    auto x = random_floats(static_cast<size_t>(T * n), 22);
    for (CpuIsa isa : available_isas()) {
      const auto full = run(p, x, 0, T, 2, isa);
      for (int64_t first : {0, 5, 64, 69})
        for (int threads : {1, 3}) {
          const auto one = run(p, x, first, 1, threads, isa);
          for (int64_t r = 0; r < n_out; ++r)
            ASSERT_EQ(fp32_to_bits(one[r]), fp32_to_bits(full[first * n_out + r]))
                << dtype_name(t) << " " << isa_name(isa) << " col " << first << " row " << r;
        }
    }
  }
}

// Decode batches: every row of a batch of T = 2..64 is bit for bit the row
// computed alone, for every packed type (F16 / BF16 too) and variant: every
// tile width and tail of the column driver, one and two threads.
TEST(PackedMatmul, RowsAloneEqualRowsInEveryBatchUpTo64) {
  std::vector<DType> types(std::begin(kTypes), std::end(kTypes));
  types.push_back(DType::F16);
  types.push_back(DType::BF16);
  for (DType t : types) {
    const int64_t n = len_for(t, 256), n_out = 40, T = 64;  // n_out: a padded last group
    const Packed p = pack(make_weights(t, n_out, n, 41, WeightFill::Quantized));
    const auto x = random_floats(static_cast<size_t>(T * n), 42);
    for (CpuIsa isa : available_isas()) {
      std::vector<std::vector<float>> alone;
      for (int64_t c = 0; c < T; ++c) alone.push_back(run(p, x, c, 1, 1, isa));
      for (int64_t batch = 2; batch <= T; ++batch) {
        const int64_t first = (batch * 7) % (T - batch + 1);  // batches at varied offsets
        const auto y = run(p, x, first, batch, batch % 2 ? 1 : 2, isa);
        for (int64_t c = 0; c < batch; ++c)
          for (int64_t r = 0; r < n_out; ++r)
            ASSERT_EQ(fp32_to_bits(y[c * n_out + r]), fp32_to_bits(alone[first + c][r]))
                << dtype_name(t) << " " << isa_name(isa) << " batch " << batch << " row "
                << first + c << " out " << r;
      }
    }
  }
}

TEST(PackedMatmul, RejectsActivationsOfTheOtherLayout) {
  auto w = make_weights(DType::Q8_0, 16, 64, 1, WeightFill::Quantized);
  Packed p = pack(w);
  auto x = random_floats(64, 2);
  ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<float> y(16);
  ActivationRows rows = quantize_activations(DType::Q8_0, x.data(), 64, 1, 64, pool, scratch);
  EXPECT_THROW(matmul(p.view(), rows, y.data(), 16, pool), Error);
  MatmulScratch scratch2;
  ActivationRows split = quantize_activations(p.view(), x.data(), 64, 1, pool, scratch2);
  WeightMatrix plain{DType::Q8_0, 64, 16, w.bytes.data(), w.stride};
  EXPECT_THROW(matmul(plain, split, y.data(), 16, pool), Error);
}

// Rows16 activations normalized on the fly (RowTransform::norm) equal the rows
// normalized first, bit for bit.
TEST(PackedMatmul, NormFusedIntoQuantizationEqualsNormFirst) {
  const int64_t T = 6;
  for (DType t : kTypes) {
    const int64_t n = len_for(t, 512);
    const Packed p = pack(make_weights(t, 40, n, 5, WeightFill::Quantized));
    auto x = random_floats(static_cast<size_t>(T * n), 13, 3.0f);
    auto weight = random_floats(static_cast<size_t>(n), 14);
    std::vector<float> h(x.size());
    rms_norm(x.data(), weight.data(), h.data(), T, n, 1e-6f);
    ThreadPool pool(2);
    MatmulScratch s1, s2;
    std::vector<float> want(T * 40), got(T * 40);
    matmul(p.view(), h.data(), n, T, want.data(), 40, pool, s1);
    const RowTransform norm = RowTransform::norm(weight.data(), 1e-6f);
    matmul(p.view(), quantize_activations(p.view(), x.data(), n, T, pool, s2, best_isa(), &norm),
           got.data(), 40, pool);
    EXPECT_EQ(got, want) << dtype_name(t);
  }
}

// Rows16 activations combined on the fly (RowTransform::silu_mul) equal
// silu_mul run first, bit for bit (F16: float rows written to the scratch).
TEST(PackedMatmul, SiluMulFusedIntoQuantizationEqualsSiluMulFirst) {
  const int64_t T = 5;
  std::vector<DType> types(std::begin(kTypes), std::end(kTypes));
  types.push_back(DType::F16);
  for (DType t : types) {
    const int64_t n = len_for(t, 768);
    const Packed p = pack(make_weights(t, 36, n, 6, WeightFill::Quantized));
    const auto gate = random_floats(static_cast<size_t>(T * n), 15, 4.0f);
    const auto up = random_floats(static_cast<size_t>(T * n), 16, 2.0f);
    std::vector<float> h = gate;
    silu_mul(h.data(), up.data(), T * n);
    ThreadPool pool(2);
    MatmulScratch s1, s2;
    std::vector<float> want(T * 36), got(T * 36);
    matmul(p.view(), h.data(), n, T, want.data(), 36, pool, s1);
    const RowTransform tr = RowTransform::silu_mul(up.data(), n);
    matmul(p.view(), quantize_activations(p.view(), gate.data(), n, T, pool, s2, best_isa(), &tr),
           got.data(), 36, pool);
    EXPECT_EQ(got, want) << dtype_name(t);
  }
}

// Several products in one region (matmul_many) equal each product alone, bit
// for bit, whatever the thread count, with a row-major matrix among them.
TEST(PackedMatmul, ManyInOneRegionEqualsEachAlone) {
  const int64_t T = 3, n = 512;
  const Packed a = pack(make_weights(DType::Q4_0, 48, n, 31, WeightFill::Quantized));
  const Packed b = pack(make_weights(DType::Q8_0, 21, n, 32, WeightFill::Quantized));
  const Packed c = pack(make_weights(DType::Q4_K, 40, n, 33, WeightFill::Quantized));
  const Packed d = pack(make_weights(DType::Q5_0, 19, n, 36, WeightFill::Quantized));
  const Packed e = pack(make_weights(DType::Q5_1, 33, n, 37, WeightFill::Quantized));
  const auto rm = make_weights(DType::Q6_K, 9, n, 34, WeightFill::Quantized);
  const WeightMatrix wr{DType::Q6_K, n, 9, rm.bytes.data(), rm.stride};
  const WeightMatrix wa = a.view(), wb = b.view(), wc = c.view(), wd = d.view(), we = e.view();
  const auto x = random_floats(static_cast<size_t>(T * n), 35);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    MatmulScratch s0, sk, sr, s1;
    // Q4_0, Q5_0, Q8_0
    const ActivationRows x0 = quantize_activations(wa, x.data(), n, T, pool, s0);
    const ActivationRows xk = quantize_activations(wc, x.data(), n, T, pool, sk);
    const ActivationRows xr = quantize_activations(wr, x.data(), n, T, pool, sr);
    const ActivationRows x1 = quantize_activations(we, x.data(), n, T, pool, s1);  // Q5_1
    std::vector<float> ya(T * 48), yb(T * 21), yc(T * 40), yr(T * 9), yd(T * 19), ye(T * 33);
    const MatmulJob jobs[] = {{&wa, &x0, ya.data(), 48}, {&wr, &xr, yr.data(), 9},
                              {&wb, &x0, yb.data(), 21}, {&wc, &xk, yc.data(), 40},
                              {&wd, &x0, yd.data(), 19}, {&we, &x1, ye.data(), 33}};
    matmul_many(jobs, 6, pool);
    std::vector<float> wa_y(T * 48), wb_y(T * 21), wc_y(T * 40), wr_y(T * 9), wd_y(T * 19),
        we_y(T * 33);
    matmul(wa, x0, wa_y.data(), 48, pool);
    matmul(wb, x0, wb_y.data(), 21, pool);
    matmul(wc, xk, wc_y.data(), 40, pool);
    matmul(wr, xr, wr_y.data(), 9, pool);
    matmul(wd, x0, wd_y.data(), 19, pool);
    matmul(we, x1, we_y.data(), 33, pool);
    EXPECT_EQ(ya, wa_y) << threads;
    EXPECT_EQ(yb, wb_y) << threads;
    EXPECT_EQ(yc, wc_y) << threads;
    EXPECT_EQ(yr, wr_y) << threads;
    EXPECT_EQ(yd, wd_y) << threads;
    EXPECT_EQ(ye, we_y) << threads;
  }
}

// What an epilogue was called on.
struct EpilogueLog {
  int64_t n_out = 0;
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> calls;
  std::vector<int> seen;  // calls per row
  bool saw_all_rows_computed = true;
  const std::vector<float>* want = nullptr;  // the finished product
};

void log_epilogue(const void* ctx, float* y, int64_t y_stride, int64_t x_rows, int64_t r0,
                  int64_t r1) {
  auto& log = *const_cast<EpilogueLog*>(static_cast<const EpilogueLog*>(ctx));
  std::lock_guard<std::mutex> lock(log.mu);
  log.calls.emplace_back(r0, r1);
  for (int64_t r = r0; r < r1; ++r) ++log.seen[static_cast<size_t>(r)];
  for (int64_t t = 0; t < x_rows; ++t)  // its rows are done when it runs
    for (int64_t r = r0; r < r1; ++r)
      if (y[t * y_stride + r] != (*log.want)[static_cast<size_t>(t * log.n_out + r)])
        log.saw_all_rows_computed = false;
}

// matmul_many runs each epilogue once on every row, after the rows are
// computed, in the threads that computed them (in pieces when several do).
TEST(PackedMatmul, ManyRunsEpiloguesOncePerRowAfterTheRows) {
  const int64_t T = 3, n = 256;
  const Packed a = pack(make_weights(DType::Q4_0, 48, n, 41, WeightFill::Quantized));    // 3 groups
  const Packed b = pack(make_weights(DType::Q8_0, 1024, n, 42, WeightFill::Quantized));  // 64
  const Packed c = pack(make_weights(DType::Q4_0, 128, n, 43, WeightFill::Quantized));   // 8
  const WeightMatrix wa = a.view(), wb = b.view(), wc = c.view();
  const auto x = random_floats(static_cast<size_t>(T * n), 44);
  for (int threads : {1, 2, 3}) {
    for (bool after_a : {false, true}) {
      ThreadPool pool(threads);
      MatmulScratch sx;
      const ActivationRows ax = quantize_activations(wa, x.data(), n, T, pool, sx);
      // After a (3 groups), b's groups start at an odd place in the region.
      std::vector<const WeightMatrix*> ws = {&wb, &wc};
      if (after_a) ws.insert(ws.begin(), &wa);
      std::vector<std::vector<float>> ys, wants;
      std::vector<std::unique_ptr<EpilogueLog>> logs;
      std::vector<MatmulEpilogue> epis(ws.size());
      std::vector<MatmulJob> jobs;
      for (size_t i = 0; i < ws.size(); ++i) {
        ys.emplace_back(static_cast<size_t>(T * ws[i]->n_out));
        wants.emplace_back(ys.back().size());
        matmul(*ws[i], ax, wants.back().data(), ws[i]->n_out, pool);
      }
      for (size_t i = 0; i < ws.size(); ++i) {
        auto log = std::make_unique<EpilogueLog>();
        log->n_out = ws[i]->n_out;
        log->seen.assign(static_cast<size_t>(ws[i]->n_out), 0);
        log->want = &wants[i];
        epis[i] = {&log_epilogue, log.get()};
        logs.push_back(std::move(log));
        jobs.push_back({ws[i], &ax, ys[i].data(), ws[i]->n_out, &epis[i]});
      }
      matmul_many(jobs.data(), jobs.size(), pool);
      for (size_t i = 0; i < ws.size(); ++i) {
        const EpilogueLog& log = *logs[i];
        EXPECT_EQ(ys[i], wants[i]);
        EXPECT_TRUE(log.saw_all_rows_computed);
        for (int c : log.seen) EXPECT_EQ(c, 1);
        for (auto [r0, r1] : log.calls) {
          EXPECT_EQ(r0 % kPackRows, 0) << r0;
          EXPECT_TRUE(r1 % kPackRows == 0 || r1 == ws[i]->n_out) << r1;
        }
        // Two or more threads own different parts of b's groups.
        if (threads > 1 && ws[i] == &wb) {
          EXPECT_GT(log.calls.size(), 1u) << threads;
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagellm::cpu
