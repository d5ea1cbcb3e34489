// y = x W^T for a stored weight matrix: the model's one entry to the
// backend's matrix kernels. x: [n_tokens][n_in] f32, y: [n_tokens][n_out] f32.
#pragma once

#include <cstdint>
#include <memory>

#include "model/weights.h"
#include "util/thread_pool.h"

namespace pagellm {

class Linear {
 public:
  Linear();
  ~Linear();
  void operator()(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                  ThreadPool& pool);

 private:
  struct Scratch;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace pagellm
