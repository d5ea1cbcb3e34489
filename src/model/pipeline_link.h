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

  // Pipelining within a step: the first stage splits a step's sequences into
  // up to micro_batches() parts and sends each as soon as its own layers are
  // done (send() must not wait for the other stages), so that the stages
  // work on different parts at once; then receive() brings back each part's
  // logits in the order sent. 1: no splitting (forward_rest only).
  virtual int32_t micro_batches() const { return 1; }
  virtual void send(const Batch& batch, std::span<const float> hidden);
  // The logits of the oldest part sent and not yet received.
  virtual std::span<const float> receive(const Batch& batch);
};

}  // namespace pagellm
