// Shared by the CUDA backend tests: the skip for machines without a GPU, and
// comparisons of device results with host references.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/kernel_test_util.h"
#include "tensor/convert.h"
#include "tensor/dtype.h"

// First statement of every test that needs a GPU: reported as Skipped, by
// name, when there is none.
#define PAGELLM_REQUIRE_CUDA_DEVICE()                                                \
  do {                                                                               \
    if (::pagellm::cuda::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

namespace pagellm::cuda::test {

// Uploads a host vector into a new device buffer.
template <typename T>
DeviceBuffer upload(const CudaDevice& dev, const std::vector<T>& v) {
  DeviceBuffer b(dev, std::max<size_t>(1, v.size() * sizeof(T)));
  dev.to_device(b.data(), v.data(), v.size() * sizeof(T));
  return b;
}

template <typename T>
std::vector<T> download(const CudaDevice& dev, const DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  dev.to_host(v.data(), b.data(), n * sizeof(T));
  return v;
}

// max |got - want| / max(|want|_inf, floor): an error relative to the size of
// the reference values (element-wise relative error is meaningless near 0).
inline double rel_error(const std::vector<float>& got, const std::vector<float>& want,
                        double floor = 1e-6) {
  double max_diff = 0, max_ref = floor;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
  }
  return max_diff / max_ref;
}

using ::pagellm::test::random_floats;  // the CPU kernel tests' Gaussian inputs

// y[v][r] = sum_c w[r][c] x[v][c] in double: the exact product of weights
// `w` [rows][cols] and n vectors x (rows x_stride apart) into rows y_stride
// apart (the gaps 0).
inline std::vector<float> reference_product(const std::vector<float>& w, int64_t rows, int64_t cols,
                                            const std::vector<float>& x, int64_t x_stride,
                                            int64_t n, int64_t y_stride) {
  std::vector<float> y(static_cast<size_t>(n * y_stride), 0.0f);
  for (int64_t v = 0; v < n; ++v)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c)
        s += static_cast<double>(w[r * cols + c]) * x[v * x_stride + c];
      y[v * y_stride + r] = static_cast<float>(s);
    }
  return y;
}

// rows x cols Gaussian weights quantized row by row to `type` (GGUF layout),
// and their exact values (dequantize_row of the stored bytes).
struct HostWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [rows][cols]
};
inline HostWeights make_weights(DType type, int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<float> f = random_floats(static_cast<size_t>(rows * cols), seed, 0.05f);
  const size_t rb = dtype_row_bytes(type, cols);
  HostWeights w;
  w.bytes.resize(rb * static_cast<size_t>(rows));
  w.values.resize(f.size());
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, f.data() + r * cols, w.bytes.data() + rb * static_cast<size_t>(r), cols);
    dequantize_row(type, w.bytes.data() + rb * static_cast<size_t>(r), w.values.data() + r * cols,
                   cols);
  }
  return w;
}

// The weight types of the CUDA GEMV/GEMM/embedding kernels.
inline const std::vector<DType>& cuda_weight_types() {
  static const std::vector<DType> t = {DType::F32,  DType::F16,    DType::BF16,  DType::Q8_0,
                                       DType::Q4_0, DType::Q4_1,   DType::Q5_0,  DType::Q5_1,
                                       DType::Q2_K, DType::Q3_K,   DType::Q4_K,  DType::Q5_K,
                                       DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS,
                                       DType::MXFP4};
  return t;
}

}  // namespace pagellm::cuda::test
