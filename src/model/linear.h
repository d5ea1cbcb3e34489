// y = x W^T for stored weight matrices: the model's one entry to the
// backend's matrix kernels. x: [n_tokens][n_in] f32, y: [n_tokens][n_out] f32.
// Several matrices that read the same input (q/k/v, gate/up) share one
// quantization of it per activation dot type.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <utility>

#include "backend/cpu/matmul.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace pagellm {

class Linear {
 public:
  struct Output {
    const WeightMatrix* w;
    float* y;
  };
  // y_i = x W_i^T for each output.
  void operator()(const float* x, int64_t n_tokens, std::initializer_list<Output> outputs,
                  ThreadPool& pool);
  void operator()(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                  ThreadPool& pool) {
    (*this)(x, n_tokens, {Output{&w, y}}, pool);
  }
  // Allocates (and touches) the scratch for `rows` activation rows for w, so
  // later calls need no new memory.
  void reserve(const WeightMatrix& w, int64_t rows);

 private:
  // One per activation format: dot type and the weight layout it is for.
  using Format = std::pair<DType, cpu::WeightLayout>;
  std::map<Format, cpu::MatmulScratch> scratch_;
};

}  // namespace pagellm
