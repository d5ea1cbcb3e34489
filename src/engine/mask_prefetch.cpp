#include "engine/mask_prefetch.h"

#include "engine/sample_output.h"

namespace pagellm {

void MaskPrefetcher::start(std::vector<SampleOutput*> outs) {
  if (outs.empty()) return;
  // No thread: the draws compute their own masks.
  worker_.start([outs = std::move(outs)] {
    for (SampleOutput* out : outs) out->prepare_mask();  // noexcept: errors stay in `out`
  });
}

}  // namespace pagellm
