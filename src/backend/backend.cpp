#include "backend/backend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "util/enum_names.h"
#include "util/error.h"
#include "util/host_pages.h"

namespace pagellm {

const char* backend_op_name(BackendOp op) {
  static constexpr std::array<const char*, 10> kNames = {
      "the GELU activation",       "sliding-window attention", "attention soft-capping",
      "RoPE frequency factors",    "mixture-of-experts layers", "gated delta-net layers",
      "the sigmoid output gate",   "latent (MLA) attention",
      "Gemma 4's per-layer inputs and shared KV", "the clamped SwiGLU activation"};
  static_assert(names_cover(BackendOp::kClampedSwiglu, kNames));
  return enum_name(op, kNames);
}

void Backend::gather_rows(const float* x, int64_t n, const int32_t* rows, int64_t count,
                          float* out) {
  const size_t row_bytes = static_cast<size_t>(n) * sizeof(float);
  for (int64_t i = 0; i < count; ++i) copy(out + i * n, x + static_cast<int64_t>(rows[i]) * n, row_bytes);
}

void Backend::combine_rows(const float* y, int64_t n, const int32_t* rows, const float* weights,
                           int64_t n_tokens, int32_t k, float* out, bool add) {
  const int64_t y_rows = n_tokens * k;
  std::vector<float> hy(static_cast<size_t>(y_rows * n)), ho(static_cast<size_t>(n_tokens * n));
  download(hy.data(), y, hy.size() * sizeof(float));
  if (add) download(ho.data(), out, ho.size() * sizeof(float));
  combine_rows_host(hy.data(), n, rows, weights, n_tokens, k, ho.data(), add);
  upload(out, ho.data(), ho.size() * sizeof(float));
}

void combine_rows_host(const float* y, int64_t n, const int32_t* rows, const float* weights,
                       int64_t n_tokens, int32_t k, float* out, bool add) {
  std::vector<float> s(static_cast<size_t>(n));
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::fill(s.begin(), s.end(), 0.0f);
    // Fused multiply-adds in slot order: the CUDA kernel's bits too.
    for (int32_t j = 0; j < k; ++j) {
      const float w = weights[t * k + j];
      const float* r = y + static_cast<int64_t>(rows[t * k + j]) * n;
      for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = std::fmaf(w, r[i], s[static_cast<size_t>(i)]);
    }
    float* o = out + t * n;
    for (int64_t i = 0; i < n; ++i) o[i] = add ? o[i] + s[static_cast<size_t>(i)] : s[static_cast<size_t>(i)];
  }
}

void Backend::ssm_conv(const SsmConvArgs&, const RecurrentBatch&) {
  throw Error(fmt::format("{} has no ssm_conv kernel", name()));
}

void Backend::gated_delta_rule(const GatedDeltaArgs&, const RecurrentBatch&) {
  throw Error(fmt::format("{} has no gated_delta_rule kernel", name()));
}

void Backend::copy_to(Backend& to, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (uses_host_memory()) return to.upload(dst, src, bytes);
  if (to.uses_host_memory()) return download(dst, src, bytes);
  std::unique_ptr<uint8_t[]> staging(new uint8_t[bytes]);
  download(staging.get(), src, bytes);
  to.upload(dst, staging.get(), bytes);
}

void Backend::matmul_groups(const float* x, int64_t rows, const MatrixView* ws, int64_t groups,
                            float* y) {
  for (int64_t g = 0; g < groups; ++g)
    matmul(x + g * rows * ws[g].n_in, rows, {{.w = &ws[g], .y = y + g * rows * ws[g].n_out}});
}

void Backend::norm_matmul(const float* x, const float* norm, float eps, float* h, int64_t rows,
                          const MatmulOutput* outs, size_t n_outs) {
  rms_norm(x, norm, h, rows, outs[0].w->n_in, eps);
  matmul(h, rows, outs, n_outs);
}

void Backend::silu_mul_matmul(float* gate, const float* up, int64_t rows, const MatmulOutput* outs,
                              size_t n_outs) {
  if (n_outs == 0) return;
  silu_mul(gate, up, rows * outs[0].w->n_in);
  matmul(gate, rows, outs, n_outs);
}

void Backend::glu_matmul(Activation act, float* gate, const float* up, int64_t rows,
                         const MatmulOutput* outs, size_t n_outs) {
  if (act == Activation::kSilu) return silu_mul_matmul(gate, up, rows, outs, n_outs);
  if (n_outs == 0) return;
  glu(act, gate, up, rows * outs[0].w->n_in);
  matmul(gate, rows, outs, n_outs);
}

void Backend::glu(Activation act, float* gate, const float* up, int64_t count) {
  if (act == Activation::kSilu) return silu_mul(gate, up, count);
  throw Error(fmt::format("{} has no {} activation", name(), activation_name(act)));
}

void Backend::attention_matmul(const KvLayerView& kv, const float* q, float* out, int32_t n_heads,
                               float scale, int64_t rows, const MatmulOutput* outs, size_t n_outs) {
  paged_attention(kv, q, out, n_heads, scale);
  matmul(out, rows, outs, n_outs);
}

void Backend::rope_kv_write(const KvLayerView& kv, float* q, int32_t n_heads, float* k,
                            const float* v, RopeStyle style, int32_t table) {
  const int32_t hd = kv.head_dim;
  rope(q, static_cast<int64_t>(n_heads) * hd, n_heads, hd, style, table);
  rope(k, static_cast<int64_t>(kv.n_kv_heads) * hd, kv.n_kv_heads, hd, style, table);
  kv_write(kv, k, v);
}

void Backend::finish_outputs(int64_t rows, const MatmulOutput* outs, size_t n_outs) {
  for (size_t i = 0; i < n_outs; ++i) {
    const MatmulOutput& o = outs[i];
    const int64_t n = o.w->n_out;
    if (o.bias) add_bias(o.y, o.bias, rows, n, n);
    if (o.add_to) add_inplace(o.add_to, o.y, rows * n);
  }
}

void Backend::kv_read(const KvLayerView&, int32_t, int32_t, int32_t, int32_t, int32_t, float*) {
  throw Error(name() + " does not run MLA's plain form (kv_read)");
}

void Backend::attention_rows(const float*, const float*, const float*, float*, int32_t,
                             const int32_t*, int32_t, int32_t, int32_t, float) {
  throw Error(name() + " does not run MLA's plain form (attention_rows)");
}

void Backend::paged_attention_tokens(const KvLayerView&, const float*, float*, int32_t, float,
                                     int32_t, const int32_t*) {
  throw Error(name() + " does not run MLA's plain form (paged_attention_tokens)");
}

PagedAttentionArgs paged_attention_args(const KvLayerView& kv, const float* q, float* out,
                                        int32_t n_heads, float scale, int32_t n_tokens,
                                        const int32_t* token_seq, const int32_t* token_pos) {
  PagedAttentionArgs a;
  a.q = q;
  a.q_stride = static_cast<int64_t>(n_heads) * kv.head_dim;
  a.out = out;
  a.v_dim = kv.v_dim;
  a.sinks = kv.sinks;
  a.out_stride = kv.v_dim > 0 ? static_cast<int64_t>(n_heads) * kv.v_dim : a.q_stride;
  a.n_tokens = n_tokens;
  a.n_heads = n_heads;
  a.n_kv_heads = kv.n_kv_heads;
  a.head_dim = kv.head_dim;
  a.k_cache = kv.k;
  a.v_cache = kv.v;
  a.kv_type = kv.type;
  a.block_size = kv.block_size;
  a.token_seq = token_seq;
  a.token_pos = token_pos;
  a.scale = scale;
  a.window = kv.window;
  a.softcap = kv.softcap;
  return a;
}

void* Backend::allocate_host(size_t bytes) {
  return allocate_host_pages(bytes);
}

void Backend::free_host(void* p, size_t bytes) noexcept {
  free_host_pages(p, bytes);
}

BackendBuffer::BackendBuffer(Backend& backend, size_t bytes, Memory memory) {
  ensure(backend, bytes, memory);
}

BackendBuffer& BackendBuffer::operator=(BackendBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    backend_ = std::exchange(o.backend_, nullptr);
    memory_ = o.memory_;
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void BackendBuffer::ensure(Backend& backend, size_t bytes, Memory memory) {
  if (backend_ == &backend && memory_ == memory && bytes_ >= bytes) return;
  reset();
  if (bytes == 0) return;
  data_ = memory == Memory::kHost ? backend.allocate_host(bytes) : backend.allocate(bytes);
  backend_ = &backend;
  memory_ = memory;
  bytes_ = bytes;
}

void BackendBuffer::reset() {
  if (data_) {
    if (memory_ == Memory::kHost)
      backend_->free_host(data_, bytes_);
    else
      backend_->deallocate(data_, bytes_);
  }
  backend_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace pagellm
