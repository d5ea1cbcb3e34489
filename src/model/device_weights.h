// Copies of a model's tensors in a backend's memory, for the layers (and the
// output head) that run on a device whose memory is not host RAM. The
// tensors keep their file layout (row-major blocks); the host's pages of the
// originals are given back once copied.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf_reader.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace pagellm {

class DeviceWeights {
 public:
  // Points every tensor of L at a copy in b's memory; the expert stacks only
  // with `experts` (else they stay on the host).
  void upload_layer(Backend& b, GgufFile& f, LayerWeights& L, bool experts = true);
  // The output norm and projection (`release` false for a projection tied to
  // the token embedding, which the host still reads).
  void upload_output(Backend& b, GgufFile& f, ModelWeights& w, const ModelHParams& hp);
  uint64_t bytes() const { return bytes_; }

 private:
  void upload_matrix(Backend& b, GgufFile& f, WeightMatrix& m, bool release);
  const float* upload_vector(Backend& b, const float* v, int64_t n);
  void* upload(Backend& b, const void* src, size_t bytes);

  std::vector<BackendBuffer> buffers_;
  uint64_t bytes_ = 0;
};

}  // namespace pagellm
