// Shared by the int8 GEMV and mmq tests: quantized activations in host
// memory, and a double-precision product of weights and activation codes.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/q8_activations.h"
#include "backend/kernel_test_util.h"
#include "tensor/convert.h"
#include "tensor/dtype.h"

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

}  // namespace pagellm::cuda::test
