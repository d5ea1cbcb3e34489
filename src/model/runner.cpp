#include "model/runner.h"

#include <cstring>
#include <exception>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <new>

#include "model/backend_support.h"
#include "model/blocks.h"
#include "model/mla_block.h"
#include "tensor/convert.h"
#include "util/error.h"
#include "util/fault_injector.h"

namespace pagellm {

// A contiguous range of layers on one backend, with its activation buffers
// in that backend's memory.
struct ModelRunner::Segment {
  std::string device;
  Backend* backend = nullptr;
  int32_t layer_begin = 0;
  int32_t layer_end = 0;
  int64_t tokens = 0;      // capacity of the buffers, in tokens
  int64_t logit_rows = 0;  // of the logits buffers (the last segment)
  BackendBuffer x, h, q, k, v, attn, gate, up;
  BackendBuffer router, moe_x, moe_y;  // mixture-of-experts layers
  BackendBuffer shexp;                 // a shared expert's rows (LayerContext::shexp)
  BackendBuffer extra;                 // LayerContext::extra
  BackendBuffer mla_plain;             // LayerContext::mla_plain
  BackendBuffer layer_inputs;          // per-layer inputs of its layers ([layer][T][n_embd_per_layer])
  MoeRouting routing;
  // For layers whose experts run on the host (remote experts): the experts'
  // input/output rows and their buffers, in the host backend's memory.
  Backend* expert_backend = nullptr;  // the host's; null when no layer of the segment needs it
  BackendBuffer ex_rows, ex_gate, ex_up, ex_x, ex_y;
  // The output head's: `logits` in device memory where that is not the
  // host's, `host_logits` where forward() returns them.
  BackendBuffer logits, host_logits;
};

namespace {

bool same_placements(const std::vector<KvPoolPlacement>& a, const std::vector<KvPoolPlacement>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].device != b[i].device || a[i].layer_begin != b[i].layer_begin ||
        a[i].layer_end != b[i].layer_end)
      return false;
  return true;
}

std::string describe(const std::vector<KvPoolPlacement>& placements) {
  std::string s;
  for (const auto& p : placements)
    s += fmt::format("{}{}-{}:{}", s.empty() ? "" : ",", p.layer_begin, p.layer_end - 1, p.device);
  return s;
}

}  // namespace

ModelRunner::ModelRunner() = default;
ModelRunner::~ModelRunner() = default;

Backend& ModelRunner::backend_of(const std::string& device) {
  auto it = backends_.find(device);
  if (it == backends_.end()) {
    std::unique_ptr<Backend> b = factory_(device);
    if (!b) throw ConfigError(fmt::format("no backend for device '{}'", device));
    it = backends_.emplace(device, std::move(b)).first;
  }
  return *it->second;
}

Backend* ModelRunner::backend_for_device(const std::string& device) const {
  for (const auto& s : segments_)
    if (s.device == device) return s.backend;
  return nullptr;
}

std::vector<DeviceWeightShare> ModelRunner::weight_shares() const {
  std::vector<DeviceWeightShare> out;
  uint64_t remote_expert_bytes = 0;
  for (const auto& s : segments_) {
    DeviceWeightShare d{s.device, s.backend, 0};
    for (int32_t l = s.layer_begin; l < s.layer_end; ++l) {
      const LayerWeights& L = w_.layers[static_cast<size_t>(l)];
      const uint64_t experts = L.bytes_per_token(w_.experts_used) - L.bytes_per_token(0);
      d.bytes += experts_on_host(l) ? L.bytes_per_token(0) : L.bytes_per_token(w_.experts_used);
      if (experts_on_host(l)) remote_expert_bytes += experts;
    }
    if (s.layer_end == hp_.n_layer) d.bytes += w_.output.bytes();
    out.push_back(d);
  }
  if (remote_expert_bytes > 0) {
    auto host = std::find_if(out.begin(), out.end(),
                             [](const DeviceWeightShare& d) { return d.device == "host"; });
    if (host == out.end()) {
      for (const auto& s : segments_)
        if (s.expert_backend) {
          out.push_back({"host", s.expert_backend, 0});
          break;
        }
      host = out.end() - 1;
    }
    host->bytes += remote_expert_bytes;
  }
  return out;
}

void ModelRunner::place(const std::vector<KvPoolPlacement>& requested) {
  const std::vector<KvPoolPlacement> placements = checked_placements(requested);
  if (weights_on_devices_ && !segments_.empty()) {
    if (!same_placements(placements, placements_))
      throw ConfigError(fmt::format(
          "the model's layers were copied to their devices at load ({}); they cannot run as {}",
          describe(placements_), describe(placements)));
    return;
  }
  for (const auto& p : placements)
    if (!weights_on_devices_ && !backend_of(p.device).uses_host_memory())
      throw ConfigError(fmt::format(
          "device {}: layers for it must be placed when the model is loaded", p.device));
  for (const auto& p : placements) check_backend_supports(backend_of(p.device), p, hp_, ropes_);
  std::vector<Segment> segments;
  for (const auto& p : placements) {
    Segment s;
    s.device = p.device;
    s.backend = &backend_of(p.device);
    s.layer_begin = p.layer_begin;
    s.layer_end = p.layer_end;
    for (int32_t l = p.layer_begin; l < p.layer_end; ++l)
      if (experts_on_host(l) && p.device != "host") s.expert_backend = &backend_of("host");
    segments.push_back(std::move(s));
  }
  segments_ = std::move(segments);
  placements_ = placements;
}

KvGroups ModelRunner::kv_groups() const {
  std::vector<int32_t> windows;
  for (const LayerSpec& l : hp_.layers) windows.push_back(l.window);
  return KvGroups::from_layer_windows(windows);
}

KvPoolShape ModelRunner::kv_shape(int32_t num_blocks, int32_t block_size, DType kv_type) const {
  KvPoolShape s;
  s.layer_begin = stage_begin_;
  s.layer_end = stage_end_;
  s.num_blocks = num_blocks;
  s.block_size = block_size;
  s.n_kv_heads = hp_.n_head_kv;
  s.head_dim = hp_.head_dim;
  s.dtype = kv_type;
  s.v_dim = hp_.mla.kv_lora_rank;  // MLA: one latent row per token, no V
  // Layers of other shapes or without KV of their own: one shape per layer.
  bool uniform = true;
  for (int32_t l = 0; l < hp_.n_layer; ++l)
    uniform = uniform && hp_.layer(l).kv_source < 0 && hp_.layer(l).n_head_kv == hp_.n_head_kv &&
              hp_.layer(l).head_dim == hp_.head_dim;
  if (!uniform)
    for (int32_t l = 0; l < hp_.n_layer; ++l)
      s.per_layer.push_back(hp_.owns_kv(l) || hp_.layer(l).recurrent
                                ? KvLayerShape{hp_.layer(l).n_head_kv, hp_.layer(l).head_dim}
                                : KvLayerShape{});
  return s;
}

RecurrentStateSpec ModelRunner::recurrent_state(int32_t n_slots) const {
  RecurrentStateSpec s;
  if (!hp_.has_recurrent()) return s;
  s.n_slots = n_slots;
  for (const LayerSpec& l : hp_.layers) s.recurrent.push_back(l.recurrent);
  s.conv_floats = hp_.delta_net.conv_state_floats();
  s.delta_floats = hp_.delta_net.delta_state_floats();
  return s;
}

void ModelRunner::ensure_workspace(Segment& s, int64_t tokens, int64_t logit_rows) {
  Backend& b = *s.backend;
  if (tokens > s.tokens) {
    s.tokens = 0;  // until every buffer has grown (a failure leaves none trusted)
    const size_t f = sizeof(float);
    const auto E = static_cast<size_t>(hp_.n_embd), KV = static_cast<size_t>(hp_.n_embd_kv()),
               Q = static_cast<size_t>(hp_.n_embd_q()), F = static_cast<size_t>(hp_.n_ff),
               T = static_cast<size_t>(tokens);
    for (BackendBuffer* buf : {&s.x, &s.h}) buf->ensure(b, T * E * f);
    for (BackendBuffer* buf : {&s.q, &s.attn}) buf->ensure(b, T * Q * f);
    for (BackendBuffer* buf : {&s.k, &s.v}) buf->ensure(b, T * KV * f);
    // MoE: gate/up hold every (token, expert) pair's rows.
    const size_t K = static_cast<size_t>(hp_.n_expert_used);
    const size_t FF = std::max({F, K * static_cast<size_t>(hp_.n_ff_exp),
                                static_cast<size_t>(hp_.n_embd_per_layer)});
    for (BackendBuffer* buf : {&s.gate, &s.up}) buf->ensure(b, T * FF * f);
    if (hp_.moe()) {
      const size_t FS = static_cast<size_t>(hp_.n_ff_shexp);
      s.router.ensure(b, T * (static_cast<size_t>(hp_.n_expert) + (FS > 0 ? 1 : 0)) * f);
      for (BackendBuffer* buf : {&s.moe_x, &s.moe_y}) buf->ensure(b, T * K * E * f);
      if (FS > 0) s.shexp.ensure(b, T * (2 * FS + E) * f);
    }
    if (const int64_t X = workspace_extra_floats(hp_); X > 0)
      s.extra.ensure(b, T * static_cast<size_t>(X) * f);
    if (hp_.n_embd_per_layer > 0)
      s.layer_inputs.ensure(b, static_cast<size_t>(s.layer_end - s.layer_begin) * T *
                                   static_cast<size_t>(hp_.n_embd_per_layer) * f);
    if (Backend* eb = s.expert_backend) {
      const size_t FX = static_cast<size_t>(hp_.n_ff_exp);
      s.ex_rows.ensure(*eb, T * E * f);
      for (BackendBuffer* buf : {&s.ex_gate, &s.ex_up}) buf->ensure(*eb, T * K * FX * f);
      for (BackendBuffer* buf : {&s.ex_x, &s.ex_y}) buf->ensure(*eb, T * K * E * f);
    }
    s.tokens = tokens;
  }
  const bool output = s.layer_end == hp_.n_layer;
  if (output && logit_rows > s.logit_rows) {
    const size_t bytes = static_cast<size_t>(logit_rows * hp_.n_vocab) * sizeof(float);
    s.logit_rows = 0;
    if (!b.uses_host_memory()) s.logits.ensure(b, bytes);
    s.host_logits.ensure(b, bytes, BackendBuffer::Memory::kHost);
    s.logit_rows = logit_rows;
  }
}

void ModelRunner::reserve_workspace(int64_t max_tokens, int64_t max_logit_rows) {
  if (FaultInjector::hit("model.workspace")) throw std::bad_alloc();
  for (Segment& s : segments_) {
    ensure_workspace(s, max_tokens, max_logit_rows);
    for (int32_t l = s.layer_begin; l < s.layer_end; ++l)
      w_.layers[static_cast<size_t>(l)].for_each_matrix([&](const WeightMatrix& m) {
        Backend& b = m.n_expert > 1 && experts_on_host(l) && s.expert_backend ? *s.expert_backend
                                                                               : *s.backend;
        b.reserve_matmul(m.expert(0).view(), max_tokens);
      });
  }
  if (last_stage()) segments_.back().backend->reserve_matmul(w_.output.view(), max_logit_rows);
}

void ModelRunner::run_layer(Segment& s, int32_t l, KvCacheStorage& kv, int64_t T) {
  Backend& b = *s.backend;
  // The FFN's experts (any layer kind may have them: qwen35moe).
  auto set_moe = [&](LayerContext& c) {
    if (!hp_.moe()) return;
    c.router = s.router.f32();
    c.moe_x = s.moe_x.f32();
    c.moe_y = s.moe_y.f32();
    c.routing = &s.routing;
    c.shexp = s.shexp.f32();
    if (experts_on_host(l) && s.expert_backend) {
      c.expert_b = s.expert_backend;
      c.expert_rows = s.ex_rows.f32();
      c.gate = s.ex_gate.f32();
      c.up = s.ex_up.f32();
      c.moe_x = s.ex_x.f32();
      c.moe_y = s.ex_y.f32();
    }
  };
  if (hp_.layers[static_cast<size_t>(l)].recurrent) {
    // No K/V: the layer's state pool, in this backend's memory.
    StatePool& sp = kv.state_pool_for_layer(l);
    LayerContext c{b, hp_, w_.layers[static_cast<size_t>(l)], l, KvLayerView{}, T,
                   s.x.f32(), s.h.f32(), s.q.f32(), s.k.f32(), s.v.f32(), s.attn.f32(),
                   s.gate.f32(), s.up.f32()};
    c.extra = s.extra.f32();
    c.recurrent = &recurrent_;
    c.conv_states = sp.conv(l);
    c.conv_stride = sp.shape().conv_floats;
    c.delta_states = sp.delta(l);
    c.delta_stride = sp.shape().delta_floats;
    set_moe(c);
    arch_->run_layer(c);
    return;
  }
  // A layer that shares KV reads its source layer's pool (which may be on
  // another device of host memory; elsewhere the check below refuses).
  const int32_t kv_l = hp_.kv_layer(l);
  KvPool& pool = kv.pool_for_layer(kv_l);
  // The pool must be in memory this backend's kernels can address.
  if (pool.backend() != &b &&
      !(b.uses_host_memory() && (!pool.backend() || pool.backend()->uses_host_memory())))
    throw Error(fmt::format("layer {} runs on {} ({}) but its KV pool is in {} memory", l, s.device,
                            b.name(), pool.backend() ? pool.backend()->name() : "host"));
  KvLayerView cache = pool.view(kv_l);
  cache.window = hp_.layers[static_cast<size_t>(l)].window;
  cache.softcap = hp_.attn_softcap;
  LayerContext c{b,         hp_,       w_.layers[static_cast<size_t>(l)],
                 l,         cache,     T,
                 s.x.f32(), s.h.f32(), s.q.f32(),
                 s.k.f32(), s.v.f32(), s.attn.f32(),
                 s.gate.f32(), s.up.f32()};
  c.extra = s.extra.f32();
  c.batch = step_batch_;
  c.mla_plain = s.mla_plain.f32();
  if (hp_.n_embd_per_layer > 0)
    c.layer_input = s.layer_inputs.f32() + (l - s.layer_begin) * T * hp_.n_embd_per_layer;
  set_moe(c);
  arch_->run_layer(c);
}

void ModelRunner::ensure_mla_plain(const Batch& batch) {
  if (!hp_.mla.enabled() || batch.step_from.empty()) return;
  int64_t n_ctx = 0;  // the longest context of a prompt position
  for (size_t t = 0; t < batch.positions.size(); ++t) {
    const int32_t p = batch.positions[t];
    if (mla_runs_plain(hp_, p, batch.step_from[static_cast<size_t>(batch.token_seq[t])]))
      n_ctx = std::max<int64_t>(n_ctx, p + 1);
  }
  if (n_ctx == 0) return;
  const int64_t floats = mla_plain_floats(hp_, n_ctx, batch.n_tokens());
  for (Segment& s : segments_)
    if (s.backend->mla_plain_form())
      s.mla_plain.ensure(*s.backend, static_cast<size_t>(floats) * sizeof(float));
}

void ModelRunner::prepare_recurrent(const Batch& batch, KvCacheStorage& kv) {
  const int32_t T = batch.n_tokens(), S = batch.n_seqs();
  if (static_cast<int32_t>(batch.state_slots.size()) != S ||
      static_cast<int32_t>(batch.step_from.size()) != S)
    throw Error("a step of a model with recurrent layers needs every sequence's state slot");
  // Checkpoints first (their source slots may be reused below); new
  // sequences start from zeros, forked ones from their parent's state,
  // restored ones from a checkpoint.
  for (const auto& [src, dst] : batch.state_saves) kv.copy_state_slot(src, dst);
  for (int32_t slot : batch.state_resets) kv.clear_state_slot(slot);
  for (const auto& [src, dst] : batch.state_copies) kv.copy_state_slot(src, dst);
  rb_begin_.assign(static_cast<size_t>(S) + 1, 0);
  rb_first_.assign(static_cast<size_t>(S), 0);
  std::vector<int32_t> count(static_cast<size_t>(S), 0);
  for (int32_t t = 0; t < T; ++t) {
    const int32_t s = batch.token_seq[static_cast<size_t>(t)];
    // The kernels take each sequence's rows together, in position order.
    if (t > 0 && s != batch.token_seq[static_cast<size_t>(t - 1)] &&
        count[static_cast<size_t>(s)] > 0)
      throw Error("a step's tokens of one sequence are not together");
    if (count[static_cast<size_t>(s)]++ == 0) rb_first_[static_cast<size_t>(s)] = batch.positions[static_cast<size_t>(t)];
  }
  for (int32_t s = 0, at = 0; s < S; ++s) {
    rb_begin_[static_cast<size_t>(s)] = at;
    at += count[static_cast<size_t>(s)];
    rb_begin_[static_cast<size_t>(s) + 1] = at;
  }
  for (int32_t t = 0; t < T; ++t) {
    const int32_t s = batch.token_seq[static_cast<size_t>(t)];
    if (t < rb_begin_[static_cast<size_t>(s)] || t >= rb_begin_[static_cast<size_t>(s) + 1])
      throw Error("a step's sequences must come in order for recurrent layers");
  }
  recurrent_.n_seqs = S;
  recurrent_.token_begin = rb_begin_.data();
  recurrent_.state_slot = batch.state_slots.data();
  recurrent_.first_pos = rb_first_.data();
  recurrent_.step_from = batch.step_from.data();
}

void ModelRunner::run_layers(Segment& s, KvCacheStorage& kv, int64_t T) {
  Backend& b = *s.backend;
  // MoE layers route on the host between their products (the experts' shapes
  // depend on the routing), and a gated attention output splits q from its
  // gate with gather_rows over host row indices (as MLA's block assembles its
  // rows, and Gemma 4's per-layer input block scales with combine_rows): a
  // recorded run can replay neither, so they run call by call.
  if (hp_.moe() || hp_.attn_output_gate || hp_.mla.enabled() || hp_.n_embd_per_layer > 0) {
    for (int32_t l = s.layer_begin; l < s.layer_end; ++l) run_layer(s, l, kv, T);
    return;
  }
  const Backend::LayerRun mode = b.begin_layers(s.layer_begin, s.layer_end);
  if (mode == Backend::LayerRun::kReplayed) return;
  try {
    for (int32_t l = s.layer_begin; l < s.layer_end; ++l) run_layer(s, l, kv, T);
  } catch (...) {
    b.cancel_layers();
    throw;
  }
  if (!b.end_layers())  // a recording that failed: nothing ran
    for (int32_t l = s.layer_begin; l < s.layer_end; ++l) run_layer(s, l, kv, T);
}

void ModelRunner::forward(const Batch& batch, KvCacheStorage& kv, ThreadPool& pool,
                         std::vector<float>& logits) {
  const std::span<const float> out = forward(batch, kv, pool);
  logits.assign(out.begin(), out.end());
}

std::span<const float> ModelRunner::forward(const Batch& batch, KvCacheStorage& kv,
                                           ThreadPool& pool) {
  if (stage_begin_ != 0) throw Error("forward() on a pipeline stage that does not hold layer 0");
  if (!last_stage() && link_ && link_->micro_batches() > 1 && batch.n_seqs() > 1)
    return forward_pipelined(batch, kv, pool, std::min(link_->micro_batches(), batch.n_seqs()));
  return run_stage(batch, kv, pool, nullptr);
}

std::span<const float> ModelRunner::forward_pipelined(const Batch& batch, KvCacheStorage& kv,
                                                      ThreadPool& pool, int32_t parts) {
  const int32_t T = batch.n_tokens(), S = batch.n_seqs();
  // Parts are runs of whole sequences; the engine adds a sequence's tokens
  // together, and anything else runs unsplit.
  for (int32_t t = 1; t < T; ++t)
    if (batch.token_seq[static_cast<size_t>(t)] < batch.token_seq[static_cast<size_t>(t - 1)])
      return run_stage(batch, kv, pool, nullptr);
  std::vector<int32_t> seq_first(static_cast<size_t>(S) + 1, T);
  for (int32_t t = T; t-- > 0;) seq_first[static_cast<size_t>(batch.token_seq[static_cast<size_t>(t)])] = t;
  for (int32_t s = S; s-- > 0;)
    seq_first[static_cast<size_t>(s)] = std::min(seq_first[static_cast<size_t>(s)], seq_first[static_cast<size_t>(s) + 1]);
  // Cut where the tokens so far reach the next 1/parts of the step.
  std::vector<int32_t> cuts = {0};
  for (int32_t s = 1; s < S && static_cast<int32_t>(cuts.size()) < parts; ++s)
    if (static_cast<int64_t>(seq_first[static_cast<size_t>(s)]) * parts >=
        static_cast<int64_t>(T) * static_cast<int64_t>(cuts.size()))
      cuts.push_back(s);
  cuts.push_back(S);
  const int32_t n = static_cast<int32_t>(cuts.size()) - 1;
  micro_.resize(static_cast<size_t>(n));
  size_t next_logit = 0;
  for (int32_t p = 0; p < n; ++p) {
    Batch& mb = micro_[static_cast<size_t>(p)];
    mb.clear();
    const int32_t s0 = cuts[static_cast<size_t>(p)], s1 = cuts[static_cast<size_t>(p) + 1];
    const int32_t t0 = seq_first[static_cast<size_t>(s0)], t1 = seq_first[static_cast<size_t>(s1)];
    for (int32_t s = s0; s < s1; ++s) mb.block_tables.push_back(batch.block_tables[static_cast<size_t>(s)]);
    if (!batch.step_from.empty())  // recurrent layers, MLA: the part's prompt ends
      mb.step_from.assign(batch.step_from.begin() + s0, batch.step_from.begin() + s1);
    if (!batch.state_slots.empty()) {  // recurrent layers: the part's sequences' slots
      mb.state_slots.assign(batch.state_slots.begin() + s0, batch.state_slots.begin() + s1);
      if (p == 0) {  // before any part reads a slot
        mb.state_saves = batch.state_saves;
        mb.state_resets = batch.state_resets;
        mb.state_copies = batch.state_copies;
      }
    }
    const auto range = [&](const auto& v) { return std::vector(v.begin() + t0, v.begin() + t1); };
    mb.tokens = range(batch.tokens);
    mb.positions = range(batch.positions);
    mb.slots = range(batch.slots);
    mb.token_seq = range(batch.token_seq);
    for (int32_t& q : mb.token_seq) q -= s0;
    for (const auto& g : batch.more_slots) mb.more_slots.push_back(range(g));
    while (next_logit < batch.logit_tokens.size() && batch.logit_tokens[next_logit] < t1)
      mb.logit_tokens.push_back(batch.logit_tokens[next_logit++] - t0);
    if (p == 0) mb.copies = batch.copies;  // before any part reads a copied block
  }
  for (const Batch& mb : micro_) link_->send(mb, run_stage(mb, kv, pool, nullptr, /*hand_over=*/false));
  const size_t V = static_cast<size_t>(hp_.n_vocab);
  pipelined_logits_.resize(batch.logit_tokens.size() * V);
  size_t row = 0;
  std::exception_ptr first_error;
  for (const Batch& mb : micro_) {
    try {  // every part's answer is taken, so that none is left for the next step
      const auto logits = link_->receive(mb);
      std::copy(logits.begin(), logits.end(), pipelined_logits_.begin() + static_cast<int64_t>(row * V));
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
    row += mb.logit_tokens.size();
  }
  if (first_error) std::rethrow_exception(first_error);
  return pipelined_logits_;
}

void PipelineLink::send(const Batch&, std::span<const float>) {
  throw Error("this pipeline link does not split steps");
}

std::span<const float> PipelineLink::receive(const Batch&) {
  throw Error("this pipeline link does not split steps");
}

std::span<const float> ModelRunner::forward_stage(const Batch& batch, KvCacheStorage& kv,
                                                  ThreadPool& pool, std::span<const float> hidden) {
  if (stage_begin_ == 0) throw Error("forward_stage() on the first pipeline stage");
  if (hidden.size() != static_cast<size_t>(batch.n_tokens()) * static_cast<size_t>(hp_.n_embd))
    throw Error(fmt::format("a pipeline stage got {} hidden values for {} tokens of {}",
                            hidden.size(), batch.n_tokens(), hp_.n_embd));
  return run_stage(batch, kv, pool, hidden.data());
}

std::span<const float> ModelRunner::run_stage(const Batch& batch, KvCacheStorage& kv,
                                              ThreadPool& pool, const float* hidden_in,
                                              bool hand_over) {
  const int64_t T = batch.n_tokens();
  const int64_t E = hp_.n_embd, V = hp_.n_vocab;
  const int64_t n_out = static_cast<int64_t>(batch.logit_tokens.size());
  // A model file truncated under its mapping fails the step cleanly (see
  // SigbusGuard) instead of killing the process: checked before and after.
  file_->check_intact();
  if (FaultInjector::hit("model.workspace")) throw std::bad_alloc();
  for (Segment& s : segments_) ensure_workspace(s, T, n_out);
  if (T == 0) return {};
  if (!batch.step_from.empty() &&
      static_cast<int32_t>(batch.step_from.size()) != batch.n_seqs())
    throw Error("a step's prompt ends (Batch::step_from) must be one per sequence");
  ensure_mla_plain(batch);
  step_batch_ = &batch;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = batch.tokens[static_cast<size_t>(t)];
    if (id < 0 || id >= V)
      throw ConfigError(fmt::format("token id {} is outside the vocabulary (0..{})", id, V - 1));
  }
  const size_t S = static_cast<size_t>(batch.n_seqs());
  const int32_t G = batch.n_groups();
  tables_.resize(S * static_cast<size_t>(G));
  block_counts_.resize(S * static_cast<size_t>(G));
  for (int32_t g = 0; g < G; ++g)
    for (size_t s = 0; s < S; ++s) {
      const auto& blocks = batch.block_tables[s]->blocks(g);
      tables_[static_cast<size_t>(g) * S + s] = blocks.data();
      block_counts_[static_cast<size_t>(g) * S + s] = static_cast<int32_t>(blocks.size());
    }
  step_groups_.clear();
  for (int32_t g = 1; g < G; ++g)
    step_groups_.push_back({batch.more_slots[static_cast<size_t>(g - 1)].data(),
                            tables_.data() + static_cast<size_t>(g) * S,
                            block_counts_.data() + static_cast<size_t>(g) * S});
  if (hp_.has_recurrent()) prepare_recurrent(batch, kv);
  StepInputs in;
  in.n_tokens = static_cast<int32_t>(T);
  in.n_seqs = batch.n_seqs();
  in.positions = batch.positions.data();
  in.token_seq = batch.token_seq.data();
  in.slots = batch.slots.data();
  in.block_tables = tables_.data();
  in.block_counts = block_counts_.data();
  in.more_groups = step_groups_;
  if (hp_.has_recurrent()) in.recurrent = &recurrent_;
  for (Segment& s : segments_) {
    s.backend->set_thread_pool(&pool);
    s.backend->begin_step(in, ropes_);
    if (s.expert_backend) s.expert_backend->set_thread_pool(&pool);
  }

  // The embedding is gathered on the host, straight into the first
  // segment's buffer when that is host memory (a later pipeline stage starts
  // from the previous stage's hidden state instead).
  Segment& first = segments_.front();
  const bool direct = first.backend->uses_host_memory();
  if (!direct) host_x_.resize(static_cast<size_t>(T * E));
  float* x0 = direct ? first.x.f32() : host_x_.data();
  const size_t x_bytes = static_cast<size_t>(T * E) * sizeof(float);
  if (hidden_in) {
    std::memcpy(x0, hidden_in, x_bytes);
  } else {
    for (int64_t t = 0; t < T; ++t)
      dequantize_row(w_.token_embd.type, w_.token_embd.row(batch.tokens[static_cast<size_t>(t)]),
                     x0 + t * E, E);
    if (hp_.embd_scale != 1.0f)
      for (int64_t i = 0; i < T * E; ++i) x0[i] *= hp_.embd_scale;
  }
  if (!direct) first.backend->upload(first.x.data(), x0, x_bytes);
  if (hp_.n_embd_per_layer > 0) {
    // Every stage computes them from the tokens, on the host.
    per_layer_inputs_.compute(batch.tokens.data(), T, stage_begin_, stage_end_, pool, layer_inputs_);
    const int64_t P = hp_.n_embd_per_layer;
    for (Segment& s : segments_) {
      const float* src = layer_inputs_.data() + (s.layer_begin - stage_begin_) * T * P;
      const size_t bytes = static_cast<size_t>((s.layer_end - s.layer_begin) * T * P) * sizeof(float);
      if (s.backend->uses_host_memory())
        std::memcpy(s.layer_inputs.data(), src, bytes);
      else
        s.backend->upload(s.layer_inputs.data(), src, bytes);
    }
  }

  for (size_t i = 0; i < segments_.size(); ++i) {
    Segment& s = segments_[i];
    if (i > 0) {
      Segment& prev = segments_[i - 1];
      prev.backend->copy_to(*s.backend, s.x.data(), prev.x.data(), x_bytes);
      transfer_bytes_ += x_bytes;
    }
    run_layers(s, kv, T);
  }

  Segment& last = segments_.back();
  Backend& b = *last.backend;
  if (!last_stage()) {
    if (!batch.hidden_tokens.empty())
      throw Error("embeddings need the last layer in this process (not a pipeline over ranks)");
    stage_out_.resize(static_cast<size_t>(T * E));
    if (b.uses_host_memory())
      std::memcpy(stage_out_.data(), last.x.f32(), x_bytes);
    else
      b.download(stage_out_.data(), last.x.data(), x_bytes);
    transfer_bytes_ += x_bytes;
    file_->check_intact();
    if (hidden_in || !hand_over) return stage_out_;
    if (!link_) throw Error("the first pipeline stage has no link to the later ones");
    return link_->forward_rest(batch, stage_out_);
  }
  // One norm per run of consecutive tokens (a prefill's last token, a
  // decode step's every token, an embedding's every position).
  const auto output_norm = [&](const std::vector<int32_t>& tokens) {
    const int64_t rows = static_cast<int64_t>(tokens.size());
    for (int64_t i = 0; i < rows;) {
      const int64_t t = tokens[static_cast<size_t>(i)];
      int64_t n = 1;
      while (i + n < rows && tokens[static_cast<size_t>(i + n)] == t + n) ++n;
      b.rms_norm(last.x.f32() + t * E, w_.output_norm, last.h.f32() + i * E, n, E, hp_.rms_eps);
      i += n;
    }
  };
  // Embeddings' rows first: `h` holds them until they are in host memory.
  hidden_out_.resize(batch.hidden_tokens.size() * static_cast<size_t>(E));
  if (!hidden_out_.empty()) {
    output_norm(batch.hidden_tokens);
    const size_t hidden_bytes = hidden_out_.size() * sizeof(float);
    if (b.uses_host_memory())
      std::memcpy(hidden_out_.data(), last.h.f32(), hidden_bytes);
    else
      b.download(hidden_out_.data(), last.h.data(), hidden_bytes);
  }
  output_norm(batch.logit_tokens);
  const MatrixView out = w_.output.view();
  float* logits = last.host_logits.f32();
  const size_t bytes = static_cast<size_t>(n_out * V) * sizeof(float);
  if (b.uses_host_memory()) {
    b.matmul(last.h.f32(), n_out, {{&out, logits}});
  } else {
    b.matmul(last.h.f32(), n_out, {{&out, last.logits.f32()}});
    b.download(logits, last.logits.data(), bytes);
  }
  if (const float c = hp_.final_softcap; c > 0)
    for (int64_t i = 0; i < n_out * V; ++i) logits[i] = c * std::tanh(logits[i] / c);
  file_->check_intact();
  return {logits, static_cast<size_t>(n_out * V)};
}

}  // namespace pagellm
