// Shared by the CUDA backend tests: the skip for machines without a GPU, and
// comparisons of device results with host references.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_device.h"

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

}  // namespace pagellm::cuda::test
