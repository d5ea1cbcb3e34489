// Pipeline parallelism across processes (e.g. MPI ranks on several
// machines): a ModelRunner that holds the first layers hands each step's
// hidden state to a PipelineLink, which has the later layers run elsewhere
// and brings back the logits.
#pragma once

#include <span>

#include "model/batch.h"

namespace pagellm {

class PipelineLink {
 public:
  virtual ~PipelineLink() = default;
  // Runs the layers after this process's on `batch` (copy-on-write copies
  // included), from `hidden` ([n_tokens][n_embd], after this process's last
  // layer); returns the logits of batch.logit_tokens ([rows][n_vocab]),
  // valid until the next call. Throws Error when a stage fails or does not
  // answer in time.
  virtual std::span<const float> forward_rest(const Batch& batch, std::span<const float> hidden) = 0;
};

}  // namespace pagellm
