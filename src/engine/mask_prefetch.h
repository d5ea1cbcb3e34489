// Grammar masks computed off the engine thread: a step's forward pass does
// not depend on the masks (only its sampling does), so the engine hands the
// constrained samples of the step to this worker before the pass and waits
// for it before sampling. For that window the worker owns those samples'
// grammar states (SampleOutput::prepare_mask touches nothing else); errors
// stay in the samples and are thrown when they draw, on the drawing thread.
#pragma once

#include <vector>

#include "util/step_worker.h"

namespace pagellm {

class SampleOutput;

class MaskPrefetcher {
 public:
  MaskPrefetcher() = default;
  MaskPrefetcher(const MaskPrefetcher&) = delete;
  MaskPrefetcher& operator=(const MaskPrefetcher&) = delete;

  // Starts preparing the masks of `outs` (the worker thread starts with the
  // first call; if it cannot, nothing is prepared and draws compute their
  // masks themselves). The caller must not touch them until wait().
  void start(std::vector<SampleOutput*> outs);
  // Until the worker is done with what start() gave it (at once if nothing).
  void wait() { worker_.wait(); }

 private:
  StepWorker worker_{10};  // below the forward pass's threads (util/step_worker.h)
};

}  // namespace pagellm
