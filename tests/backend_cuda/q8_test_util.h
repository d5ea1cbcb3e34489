// Shared by the int8 GEMV and mmq tests: quantized activations in host
// memory, and a double-precision product of weights and activation codes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cuda/gemv_q8.h"
#include "backend/cuda/q8_activations.h"
#include "backend/kernel_test_util.h"
#include "cuda_test_util.h"
#include "tensor/convert.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace pagellm::cuda::test {

inline const std::vector<DType>& q8_types() {
  static const std::vector<DType> t = {DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                       DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                                       DType::Q4_K, DType::Q5_K, DType::Q6_K};
  return t;
}

// Quantized activations in host memory (16-byte aligned, as a device buffer).
struct HostAct {
  std::vector<uint64_t> storage;  // 8-byte words: aligned for the views
  Q8ActView view;
  HostAct(const std::vector<float>& x, int64_t x_stride, int64_t n, int64_t cols)
      : storage((q8_act_bytes(n, cols) + 15) / 8 + 2) {
    void* base = align16();
    quantize_q8_activations_host(x.data(), x_stride, n, cols, base);
    view = q8_act_view(base, n, cols);
  }
  void* align16() {
    auto p = reinterpret_cast<uintptr_t>(storage.data());
    return reinterpret_cast<void*>((p + 15) & ~uintptr_t{15});
  }
  // Element c of vector v as the codes say: d * q.
  double value(int64_t v, int64_t c) const {
    return static_cast<double>(view.d[v * (view.cols / 32) + c / 32]) * view.qs[v * view.cols + c];
  }
};

// y[v][r] = sum_c w[r][c] * (d q)[v][c] in double.
inline std::vector<float> reference(const std::vector<float>& w, int64_t rows, int64_t cols,
                                    const HostAct& a, int64_t n, int64_t y_stride) {
  std::vector<float> y(static_cast<size_t>(n * y_stride), 0.0f);
  for (int64_t v = 0; v < n; ++v)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += w[r * cols + c] * a.value(v, c);
      y[v * y_stride + r] = static_cast<float>(s);
    }
  return y;
}

inline std::vector<float> dequantized(const ::pagellm::test::TestWeights& w) {
  std::vector<float> f(static_cast<size_t>(w.rows * w.n));
  for (int64_t r = 0; r < w.rows; ++r)
    dequantize_row(w.type, w.bytes.data() + r * w.stride, f.data() + r * w.n, w.n);
  return f;
}

// On a GPU: matrices sharing a launch of `multi` (gemv_q8_multi, mmq_multi)
// get the bits of launches of their own, an empty matrix in the middle.
template <typename Launch>
void check_multi_matrix_launch(const CudaDevice& dev, int64_t n, Launch multi) {
  const int64_t cols = 1024;
  const int64_t rows[] = {77, 0, 16};
  const auto x = random_floats(n * cols, 71);
  DeviceBuffer dx = upload(dev, x), dq(dev, q8_act_bytes(n, cols));
  quantize_q8_activations(dev, dx.as<float>(), cols, n, cols, dq.data());
  const Q8ActView a = q8_act_view(dq.data(), n, cols);
  for (DType type : {DType::Q4_0, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(type));
    std::vector<DeviceBuffer> dw, together, alone;
    GemvQ8Target t[3];
    for (int i = 0; i < 3; ++i) {
      const auto w = ::pagellm::test::make_weights(type, std::max<int64_t>(rows[i], 1), cols,
                                                   72 + i, ::pagellm::test::WeightFill::Quantized);
      dw.push_back(upload(dev, w.bytes));
      together.emplace_back(dev, (rows[i] + 1) * n * sizeof(float));
      alone.emplace_back(dev, (rows[i] + 1) * n * sizeof(float));
      dev.fill_zero(together.back().data(), together.back().bytes());
      dev.fill_zero(alone.back().data(), alone.back().bytes());
      t[i] = GemvQ8Target{dw.back().data(), rows[i], together.back().as<float>(), rows[i] + 1};
    }
    multi(dev, type, cols, t, 3, a, static_cast<int32_t>(n));
    for (int i = 0; i < 3; ++i) {
      const GemvQ8Target one{dw[i].data(), rows[i], alone[i].as<float>(), rows[i] + 1};
      multi(dev, type, cols, &one, 1, a, static_cast<int32_t>(n));
      const size_t count = static_cast<size_t>((rows[i] + 1) * n);
      EXPECT_EQ(download<float>(dev, together[i], count), download<float>(dev, alone[i], count))
          << "matrix " << i;
    }
  }
  const GemvQ8Target none[1] = {};
  EXPECT_THROW(multi(dev, DType::Q4_0, cols, none, 0, a, static_cast<int32_t>(n)), ConfigError);
}

}  // namespace pagellm::cuda::test
