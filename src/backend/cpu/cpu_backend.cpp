#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cpu/activation_quant.h"
#include "backend/cpu/bandwidth.h"
#include "backend/cpu/delta_rule.h"
#include "backend/cpu/kv_store.h"
#include "backend/cpu/packed_weights.h"
#include "backend/cpu/paged_attention.h"
#include "backend/cpu/ssm_conv.h"
#include <fmt/format.h>

#include "tensor/convert.h"
#include "util/error.h"
#include "util/host_pages.h"
#include "util/step_profile.h"

namespace pagellm::cpu {

CpuBackend::CpuBackend(ThreadPool* pool, bool staged) : pool_(pool), staged_(staged) {}

CpuBackend::~CpuBackend() = default;

ThreadPool& CpuBackend::pool() {
  if (!pool_) throw Error("the CPU backend has no thread pool");
  return *pool_;
}

void* CpuBackend::allocate(size_t bytes) {
  // Zeroed, given back to the OS on release, resident from the start, on
  // huge pages where possible (KV pools: scattered block reads).
  void* p = allocate_host_pages(bytes);
  held_ += bytes;
  return p;
}

void CpuBackend::deallocate(void* p, size_t bytes) noexcept {
  free_host_pages(p, bytes);
  if (p) held_ -= bytes;
}

void* CpuBackend::reserve_range(size_t bytes) {
  return reserve_host_pages(bytes);
}

bool CpuBackend::commit_range(void* p, size_t bytes) {
  if (!populate_host_range(p, bytes)) {
    release_host_range(p, bytes);  // what it populated before the failure
    return false;
  }
  held_ += bytes;
  return true;
}

void CpuBackend::decommit_range(void* p, size_t bytes) noexcept {
  release_host_range(p, bytes);
  held_ -= bytes;
}

void CpuBackend::release_range(void* p, size_t bytes) noexcept {
  free_host_pages(p, bytes);
}

void CpuBackend::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void CpuBackend::download(void* host_dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}

MatrixView CpuBackend::prepare_weights(const MatrixView& m, int64_t stack_rows,
                                       const std::function<void*(size_t)>& alloc,
                                       ThreadPool& pool) const {
  if (m.layout != WeightLayout::Rows || !packable(m.type) || m.n_in % 32 != 0) return m;
  // A stack packs as one matrix when no 16-row group straddles two parts.
  if (stack_rows != m.n_out && stack_rows % kPackRows != 0) return m;
  auto* dst = static_cast<uint8_t*>(alloc(packed_bytes(m.type, m.n_in, m.n_out)));
  // Packing runs at memory speed on several threads (0.85B Q8_0: 0.56 s on one).
  const int64_t groups = (m.n_out + kPackRows - 1) / kPackRows;
  const size_t gbytes = packed_group_bytes(m.type, m.n_in);
  const auto* src = static_cast<const uint8_t*>(m.data);
  pool.parallel_for(groups, [&](int64_t g0, int64_t g1, int) {
    const int64_t r0 = g0 * kPackRows;
    const int64_t rows = std::min(m.n_out, g1 * kPackRows) - r0;
    pack_rows16(m.type, m.n_in, rows, src + static_cast<size_t>(r0) * m.row_stride, m.row_stride,
                dst + static_cast<size_t>(g0) * gbytes);
  });
  return {m.type, m.n_in, m.n_out, dst, gbytes, WeightLayout::Rows16};
}

MemoryBandwidth CpuBackend::measure_host_bandwidth(bool read_only) {
  if (read_only) return {cpu::measure_read_bandwidth(pool()), 0};
  const Bandwidth b = cpu::measure_bandwidth(pool());
  return {b.read_bytes_per_s, b.triad_bytes_per_s};
}

void CpuBackend::begin_step(const StepInputs& in, std::span<const RopeParams> ropes) {
  step_ = in;
  ropes_.resize(ropes.size());
  rope_params_.resize(ropes.size());
  for (size_t i = 0; i < ropes.size(); ++i) {
    const RopeParams& r = ropes[i];
    if (!ropes_[i] || !(r == rope_params_[i])) {
      ropes_[i] = std::make_unique<RopeCache>(r.n_rot, r.freq_base, r.freq_scale, r.freq_factors,
                                              r.attn_factor);
      rope_params_[i] = r;
    }
    ropes_[i]->prepare(in.positions, in.n_tokens);
  }
}

const RopeCache& CpuBackend::rope_table(int32_t table) const {
  if (table < 0 || static_cast<size_t>(table) >= ropes_.size())
    throw Error(fmt::format("RoPE table {} of a step with {}", table, ropes_.size()));
  return *ropes_[static_cast<size_t>(table)];
}

void CpuBackend::run_epilogue(const void* ctx, float* y, int64_t y_stride, int64_t x_rows,
                              int64_t r0, int64_t r1) {
  const auto& e = *static_cast<const OutputEpilogue*>(ctx);
  if (e.bias) pagellm::add_bias(y + r0, e.bias + r0, x_rows, r1 - r0, y_stride);
  if (e.add_to)
    for (int64_t t = 0; t < x_rows; ++t)
      pagellm::add_inplace(e.add_to + t * y_stride + r0, y + t * y_stride + r0, r1 - r0);
}

void CpuBackend::run_prepared(const float* x, int64_t rows, const MatmulOutput* outs, size_t n_outs,
                              const RowTransform* transform) {
  StepProfileScope profile(StepPhase::kMatmul);
  prepared_.clear();
  prepared_.reserve(n_outs);  // jobs_ point into it
  epilogue_args_.clear();
  epilogue_args_.reserve(n_outs);  // and into these
  epilogues_.clear();
  epilogues_.reserve(n_outs);
  jobs_.clear();
  for (size_t i = 0; i < n_outs; ++i) {
    const MatmulOutput& o = outs[i];
    const MatrixView& w = *o.w;
    const Format f{dot_type(w.type), w.layout};
    const ActivationRows* act = nullptr;
    for (const auto& p : prepared_)
      if (p.first == f) act = &p.second;
    if (!act) {
      prepared_.emplace_back(
          f, quantize_activations(w, x, w.n_in, rows, pool(), scratch_[f], best_isa(), transform));
      act = &prepared_.back().second;
    }
    const MatmulEpilogue* epilogue = nullptr;
    if (o.bias || o.add_to) {
      epilogue_args_.push_back({o.bias, o.add_to});
      epilogues_.push_back({&run_epilogue, &epilogue_args_.back()});
      epilogue = &epilogues_.back();
    }
    jobs_.push_back({&w, act, o.y, w.n_out, epilogue});
  }
  // One parallel region for all of them (prepared_ no longer grows: the
  // activation pointers in jobs_ stay valid).
  matmul_many(jobs_.data(), jobs_.size(), pool());
}

void CpuBackend::matmul(const float* x, int64_t rows, const MatmulOutput* outs, size_t n_outs) {
  run_prepared(x, rows, outs, n_outs, nullptr);
}

void CpuBackend::matmul_groups(const float* x, int64_t rows, const MatrixView* ws, int64_t groups,
                               float* y) {
  if (groups <= 0 || rows <= 0) return;
  StepProfileScope profile(StepPhase::kMatmul);
  const MatrixView& w0 = ws[0];
  for (int64_t g = 1; g < groups; ++g)
    if (ws[g].type != w0.type || ws[g].layout != w0.layout || ws[g].n_in != w0.n_in ||
        ws[g].n_out != w0.n_out)
      throw Error("matmul_groups: the groups' matrices differ in type or shape");
  // All groups' rows quantized at once (row by row, as matmul() would each),
  // then one job per group over its rows: the same bits as matmul() per group.
  const Format f{dot_type(w0.type), w0.layout};
  const ActivationRows all =
      quantize_activations(w0, x, w0.n_in, rows * groups, pool(), scratch_[f], best_isa(), nullptr);
  group_acts_.assign(static_cast<size_t>(groups), all);
  jobs_.clear();
  for (int64_t g = 0; g < groups; ++g) {
    ActivationRows& a = group_acts_[static_cast<size_t>(g)];
    a.rows = rows;
    a.data = static_cast<const uint8_t*>(all.data) + static_cast<size_t>(g * rows) * all.row_stride;
    jobs_.push_back({&ws[g], &a, y + g * rows * w0.n_out, w0.n_out, nullptr});
  }
  matmul_many(jobs_.data(), jobs_.size(), pool());
}

namespace {
bool any_float(const MatmulOutput* outs, size_t n_outs) {
  for (size_t i = 0; i < n_outs; ++i)
    if (dot_type(outs[i].w->type) == DType::F32) return true;
  return false;
}
}  // namespace

void CpuBackend::norm_matmul(const float* x, const float* norm, float eps, float* h, int64_t rows,
                             const MatmulOutput* outs, size_t n_outs) {
  if (any_float(outs, n_outs)) return Backend::norm_matmul(x, norm, eps, h, rows, outs, n_outs);
  const RowTransform t = RowTransform::norm(norm, eps);
  run_prepared(x, rows, outs, n_outs, &t);
}

void CpuBackend::silu_mul_matmul(float* gate, const float* up, int64_t rows,
                                 const MatmulOutput* outs, size_t n_outs) {
  if (n_outs == 0) return;
  if (any_float(outs, n_outs)) return Backend::silu_mul_matmul(gate, up, rows, outs, n_outs);
  const RowTransform t = RowTransform::silu_mul(up, outs[0].w->n_in);
  run_prepared(gate, rows, outs, n_outs, &t);
}

void CpuBackend::glu_matmul(Activation act, float* gate, const float* up, int64_t rows,
                            const MatmulOutput* outs, size_t n_outs) {
  if (n_outs == 0) return;
  if (any_float(outs, n_outs)) return Backend::glu_matmul(act, gate, up, rows, outs, n_outs);
  const RowTransform t = RowTransform::glu(act, up, outs[0].w->n_in);
  run_prepared(gate, rows, outs, n_outs, &t);
}

void CpuBackend::reserve_matmul(const MatrixView& w, int64_t rows) {
  const Format f{dot_type(w.type), w.layout};
  if (f.first == DType::F32) return;  // float activations are used in place
  const size_t bytes = activation_stride(w) * static_cast<size_t>(rows);
  auto& scratch = scratch_[f];
  if (scratch.capacity() >= bytes) return;
  std::memset(scratch.reserve(bytes), 0, bytes);
}

void CpuBackend::rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t n,
                          float eps) {
  pagellm::rms_norm(x, weight, out, rows, n, eps);
}

void CpuBackend::add_inplace(float* x, const float* y, int64_t count) {
  pagellm::add_inplace(x, y, count);
}

void CpuBackend::gather_rows(const float* x, int64_t n, const int32_t* rows, int64_t count,
                             float* out) {
  const size_t row_bytes = static_cast<size_t>(n) * sizeof(float);
  // Pieces of at least 64 KiB: a decode step's few rows (MLA gathers ~6 per
  // layer) are copied faster than the pool wakes.
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>((size_t{64} << 10) / row_bytes));
  pool().parallel_for(count, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i)
      std::memcpy(out + i * n, x + static_cast<int64_t>(rows[i]) * n, row_bytes);
  }, grain);
}

void CpuBackend::combine_rows(const float* y, int64_t n, const int32_t* rows, const float* weights,
                              int64_t n_tokens, int32_t k, float* out, bool add) {
  // Per token: where the split falls changes no value.
  pool().parallel_for(n_tokens, [&](int64_t b, int64_t e, int) {
    combine_rows_host(y, n, rows + b * k, weights + b * k, e - b, k, out + b * n, add);
  });
}

void CpuBackend::add_bias(float* x, const float* bias, int64_t rows, int64_t n, int64_t stride) {
  pagellm::add_bias(x, bias, rows, n, stride);
}

void CpuBackend::silu_mul(float* gate, const float* up, int64_t count) {
  // Element-wise: where the split falls changes no value.
  pool().parallel_for(
      count, [&](int64_t b, int64_t e, int) { pagellm::silu_mul(gate + b, up + b, e - b); });
}

void CpuBackend::glu(Activation act, float* gate, const float* up, int64_t count) {
  if (act == Activation::kSilu) return silu_mul(gate, up, count);
  pool().parallel_for(
      count, [&](int64_t b, int64_t e, int) { pagellm::glu(act, gate + b, up + b, e - b); });
}

void CpuBackend::rope(float* x, int64_t stride, int32_t n_heads, int32_t head_dim, RopeStyle style,
                      int32_t table) {
  const RopeCache& rope = rope_table(table);
  // Heads rotate independently: a prefill's split over the pool (a decode
  // step's few pairs are not worth waking it).
  if (step_.n_tokens < 8) return rope.apply(x, step_.n_tokens, stride, n_heads, head_dim, style);
  pool().parallel_for(n_heads, [&](int64_t h0, int64_t h1, int) {
    rope.apply(x + h0 * head_dim, step_.n_tokens, stride, static_cast<int32_t>(h1 - h0), head_dim,
                 style);
  });
}

void CpuBackend::kv_write(const KvLayerView& kv, const float* k, const float* v) {
  const int64_t n = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim;
  const size_t slot_bytes =
      static_cast<size_t>(kv.n_kv_heads) * dtype_row_bytes(kv.type, kv.head_dim);
  const int64_t* slots = step_.group(kv.group).slots;
  for (int32_t t = 0; t < step_.n_tokens; ++t) {
    const int64_t slot = slots[t];
    if (slot < 0) continue;
    store_kv_row(kv.type, kv.n_kv_heads, kv.head_dim, k + t * n,
                 static_cast<uint8_t*>(kv.k) + static_cast<size_t>(slot) * slot_bytes);
    if (kv.v_dim > 0) continue;  // a latent cache: no V rows
    store_kv_row(kv.type, kv.n_kv_heads, kv.head_dim, v + t * n,
                 static_cast<uint8_t*>(kv.v) + static_cast<size_t>(slot) * slot_bytes);
  }
}

void CpuBackend::paged_attention(const KvLayerView& kv, const float* q, float* out, int32_t n_heads,
                                 float scale) {
  StepProfileScope profile(StepPhase::kAttention);
  PagedAttentionArgs pa = paged_attention_args(kv, q, out, n_heads, scale, step_.n_tokens,
                                               step_.token_seq, step_.positions);
  pa.block_tables = step_.group(kv.group).block_tables;
  pagellm::paged_attention(pa, pool());
}

void CpuBackend::paged_attention_tokens(const KvLayerView& kv, const float* q, float* out,
                                        int32_t n_heads, float scale, int32_t n,
                                        const int32_t* tokens) {
  StepProfileScope profile(StepPhase::kAttention);
  rows_seq_.resize(static_cast<size_t>(n));
  rows_pos_.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= step_.n_tokens)
      throw Error("paged_attention_tokens: a token outside the step");
    rows_seq_[static_cast<size_t>(i)] = step_.token_seq[tokens[i]];
    rows_pos_[static_cast<size_t>(i)] = step_.positions[tokens[i]];
  }
  PagedAttentionArgs pa =
      paged_attention_args(kv, q, out, n_heads, scale, n, rows_seq_.data(), rows_pos_.data());
  pa.block_tables = step_.group(kv.group).block_tables;
  pagellm::paged_attention(pa, pool());
}

void CpuBackend::kv_read(const KvLayerView& kv, int32_t seq, int32_t first, int32_t count,
                         int32_t col, int32_t n, float* out) {
  const int64_t width = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim;
  if (seq < 0 || seq >= step_.n_seqs || first < 0 || count < 0 || col < 0 || n < 0 ||
      col + n > width)
    throw Error("kv_read: rows or columns outside the step's cache");
  const int32_t* table = step_.group(kv.group).block_tables[seq];
  const size_t row_bytes = static_cast<size_t>(kv.n_kv_heads) * dtype_row_bytes(kv.type, kv.head_dim);
  pool().parallel_for(count, [&](int64_t begin, int64_t end, int) {
    std::vector<float> row(static_cast<size_t>(width));
    for (int64_t i = begin; i < end; ++i) {
      const int64_t p = first + i;
      const int64_t slot = static_cast<int64_t>(table[p / kv.block_size]) * kv.block_size +
                           p % kv.block_size;
      dequantize_row(kv.type, static_cast<const uint8_t*>(kv.k) + slot * row_bytes, row.data(),
                     width);
      std::memcpy(out + i * n, row.data() + col, sizeof(float) * static_cast<size_t>(n));
    }
  });
}

void CpuBackend::attention_rows(const float* q, const float* k, const float* v, float* out,
                                int32_t n_tokens, const int32_t* positions, int32_t n_heads,
                                int32_t n_kv_heads, int32_t head_dim, float scale) {
  StepProfileScope profile(StepPhase::kAttention);
  if (n_tokens <= 0) return;
  constexpr int32_t kBlock = 16;
  // K and V as one sequence's paged rows: block b holds positions [16 b, 16 b + 16).
  const int32_t n_ctx = *std::max_element(positions, positions + n_tokens) + 1;
  rows_table_.resize(static_cast<size_t>((n_ctx + kBlock - 1) / kBlock));
  for (size_t b = 0; b < rows_table_.size(); ++b) rows_table_[b] = static_cast<int32_t>(b);
  rows_seq_.assign(static_cast<size_t>(n_tokens), 0);
  const int32_t* tables[1] = {rows_table_.data()};
  PagedAttentionArgs a;
  a.q = q;
  a.q_stride = a.out_stride = static_cast<int64_t>(n_heads) * head_dim;
  a.out = out;
  a.n_tokens = n_tokens;
  a.n_heads = n_heads;
  a.n_kv_heads = n_kv_heads;
  a.head_dim = head_dim;
  a.k_cache = k;
  a.v_cache = v;
  a.kv_type = DType::F32;
  a.block_size = kBlock;
  a.token_seq = rows_seq_.data();
  a.token_pos = positions;
  a.block_tables = tables;
  a.scale = scale;
  pagellm::paged_attention(a, pool());
}

void CpuBackend::ssm_conv(const SsmConvArgs& args, const RecurrentBatch& batch) {
  pagellm::ssm_conv(args, batch, pool());
}

void CpuBackend::gated_delta_rule(const GatedDeltaArgs& args, const RecurrentBatch& batch) {
  pagellm::gated_delta_rule(args, batch, pool());
}

}  // namespace pagellm::cpu
