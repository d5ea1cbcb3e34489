// Backend::prepare_weights, the load-time layout of host matrices: the CPU
// backend repacks what it can (every row comes back from the Rows16 copy),
// leaves the rest in place without allocating, and the interface's default
// leaves every matrix in place.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/packed_weights.h"
#include "backend/kernel_test_util.h"

namespace pagellm::cpu {
namespace {

using test::make_weights;
using test::WeightFill;

// prepare_weights with an allocator that records what it gave.
struct Prepared {
  MatrixView got;
  std::vector<std::unique_ptr<uint8_t[]>> buffers;
  std::vector<size_t> sizes;
};

// `base`: the Backend interface's own definition, not the CPU backend's.
Prepared prepare(const CpuBackend& b, const test::TestWeights& w, int64_t stack_rows,
                 bool base = false) {
  ThreadPool pool(2);
  Prepared p;
  const MatrixView m{w.type, w.n, w.rows, w.bytes.data(), w.stride, WeightLayout::Rows};
  auto alloc = [&](size_t n) {
    p.buffers.emplace_back(new uint8_t[n]);
    p.sizes.push_back(n);
    return static_cast<void*>(p.buffers.back().get());
  };
  p.got = base ? b.Backend::prepare_weights(m, stack_rows, alloc, pool)
               : b.prepare_weights(m, stack_rows, alloc, pool);
  return p;
}

TEST(PrepareWeights, TheCpuBackendRepacksEveryRowOnce) {
  const CpuBackend cpu;
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16}) {
    const int64_t n = dtype_block_size(t) == 256 ? 512 : 96;
    // 37 rows: a partial last group; rows at odd offsets (pad 6 keeps F16 aligned).
    const auto w = make_weights(t, 37, n, 5, WeightFill::RandomBytes, 6);
    const Prepared p = prepare(cpu, w, 37);
    ASSERT_EQ(p.buffers.size(), 1u) << dtype_name(t);
    EXPECT_EQ(p.got.data, p.buffers[0].get());
    EXPECT_EQ(p.got.layout, WeightLayout::Rows16);
    EXPECT_EQ(p.got.n_out, 37);
    EXPECT_EQ(p.got.bytes(), p.sizes[0]);  // the layout's size is what was asked for
    std::vector<uint8_t> row(dtype_row_bytes(t, n));
    for (int64_t r = 0; r < w.rows; ++r) {
      unpack_row16(t, n, p.got.data, r, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), w.row(r), row.size())) << dtype_name(t) << " row " << r;
    }
  }
}

TEST(PrepareWeights, WhatCannotBePackedStaysInPlace) {
  const CpuBackend cpu;
  struct Case {
    DType type;
    int64_t rows, n, stack_rows;
  };
  for (const Case c : {Case{DType::F32, 32, 64, 32},    // no Rows16 form
                       Case{DType::F16, 32, 48, 32},    // rows not of whole 32-element blocks
                       Case{DType::Q8_0, 40, 64, 20}}) {  // a 16-row group would straddle two parts
    const auto w = make_weights(c.type, c.rows, c.n, 1, WeightFill::RandomBytes);
    const Prepared p = prepare(cpu, w, c.stack_rows);
    EXPECT_TRUE(p.buffers.empty()) << dtype_name(c.type);
    EXPECT_EQ(p.got.data, w.bytes.data());
    EXPECT_EQ(p.got.layout, WeightLayout::Rows);
  }
  // A stack of whole groups packs as one matrix.
  const auto w = make_weights(DType::Q8_0, 64, 64, 2, WeightFill::RandomBytes);
  EXPECT_EQ(prepare(cpu, w, 32).got.layout, WeightLayout::Rows16);
}

TEST(PrepareWeights, TheInterfaceDefaultReadsInPlace) {
  const auto w = make_weights(DType::Q4_0, 32, 64, 3, WeightFill::RandomBytes);
  const Prepared p = prepare(CpuBackend{}, w, 32, /*base=*/true);
  EXPECT_TRUE(p.buffers.empty());
  EXPECT_EQ(p.got.data, w.bytes.data());
  EXPECT_EQ(p.got.layout, WeightLayout::Rows);
}

}  // namespace
}  // namespace pagellm::cpu
