#include "model/device_weights.h"

#include <fmt/format.h>

#include "util/error.h"

namespace pagellm {

void* DeviceWeights::upload(Backend& b, const void* src, size_t bytes) {
  BackendBuffer buf(b, bytes);
  b.upload(buf.data(), src, bytes);
  bytes_ += bytes;
  buffers_.push_back(std::move(buf));
  return buffers_.back().data();
}

void DeviceWeights::upload_matrix(Backend& b, GgufFile& f, WeightMatrix& m, bool release) {
  if (m.layout != WeightLayout::Rows)
    throw Error(fmt::format("a repacked matrix cannot be copied to {}", b.name()));
  const size_t bytes = static_cast<size_t>(m.total_rows()) * m.row_bytes;
  const uint8_t* host = m.data;
  m.data = static_cast<const uint8_t*>(upload(b, host, bytes));
  if (release) f.release(host, bytes);
}

const float* DeviceWeights::upload_vector(Backend& b, const float* v, int64_t n) {
  if (!v) return nullptr;
  return static_cast<const float*>(upload(b, v, static_cast<size_t>(n) * sizeof(float)));
}

void DeviceWeights::upload_layer(Backend& b, GgufFile& f, LayerWeights& L, bool experts) {
  L.for_each_matrix([&](WeightMatrix& m) {
    if (experts || m.n_expert == 1) upload_matrix(b, f, m, true);
  });
  // Expert biases stay with the expert stacks (on the host without `experts`).
  for (size_t r = 0; r < kVectorRoles; ++r)
    if (experts || !is_expert_vector(static_cast<VectorRole>(r)))
      L.vectors[r].data = upload_vector(b, L.vectors[r].data, L.vectors[r].n);
}

void DeviceWeights::upload_output(Backend& b, GgufFile& f, ModelWeights& w,
                                  const ModelHParams& hp) {
  upload_matrix(b, f, w.output, !w.tied_output);
  w.output_norm = upload_vector(b, w.output_norm, hp.n_embd);
}

}  // namespace pagellm
