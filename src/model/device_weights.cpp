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
  if (m.layout != cpu::WeightLayout::Rows)
    throw Error(fmt::format("a repacked matrix cannot be copied to {}", b.name()));
  const size_t bytes = static_cast<size_t>(m.n_out) * m.row_bytes;
  const uint8_t* host = m.data;
  m.data = static_cast<const uint8_t*>(upload(b, host, bytes));
  if (release) f.release(host, bytes);
}

const float* DeviceWeights::upload_vector(Backend& b, const float* v, int64_t n) {
  if (!v) return nullptr;
  return static_cast<const float*>(upload(b, v, static_cast<size_t>(n) * sizeof(float)));
}

void DeviceWeights::upload_layer(Backend& b, GgufFile& f, LayerWeights& L, const ModelHParams& hp) {
  const int64_t E = hp.n_embd, KV = hp.n_embd_kv();
  for (WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
    upload_matrix(b, f, *m, true);
  L.attn_norm = upload_vector(b, L.attn_norm, E);
  L.ffn_norm = upload_vector(b, L.ffn_norm, E);
  L.bq = upload_vector(b, L.bq, E);
  L.bk = upload_vector(b, L.bk, KV);
  L.bv = upload_vector(b, L.bv, KV);
}

void DeviceWeights::upload_output(Backend& b, GgufFile& f, ModelWeights& w,
                                  const ModelHParams& hp) {
  upload_matrix(b, f, w.output, !w.tied_output);
  w.output_norm = upload_vector(b, w.output_norm, hp.n_embd);
}

}  // namespace pagellm
