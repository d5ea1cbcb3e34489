#include "planner/cost_model.h"

#include <algorithm>
#include <cmath>

#include "device/device.h"
#include "kvcache/kv_group.h"

namespace pagellm {

namespace {
int32_t layer_window(const ModelFootprint& fp, int l) {
  return static_cast<size_t>(l) < fp.layer_windows.size() ? fp.layer_windows[static_cast<size_t>(l)] : 0;
}
}  // namespace

std::vector<int32_t> kv_group_blocks(const KvGroups& groups, int32_t block_size,
                                     int32_t max_num_seqs, int32_t max_batched_tokens,
                                     int32_t full_blocks) {
  std::vector<int32_t> out = {full_blocks};
  for (int32_t g = 1; g < groups.n_groups(); ++g)
    out.push_back(window_group_blocks(groups.windows[static_cast<size_t>(g)], block_size,
                                      max_num_seqs, max_batched_tokens, full_blocks));
  return out;
}

std::vector<Plan::KvGroupPlan> plan_kv_groups(const ModelFootprint& fp, int32_t block_size,
                                              int32_t max_num_seqs, int64_t blocks) {
  std::vector<int32_t> windows(static_cast<size_t>(fp.n_layer));
  for (int l = 0; l < fp.n_layer; ++l) windows[static_cast<size_t>(l)] = layer_window(fp, l);
  const KvGroups groups = KvGroups::from_layer_windows(windows);
  // A group's layers that keep K/V: recurrent layers (group 0's window) keep
  // none, and a layer that reads another's cache (same window) none of its own.
  std::vector<int32_t> kv_layers(static_cast<size_t>(groups.n_groups()), 0);
  std::vector<int32_t> shared(static_cast<size_t>(groups.n_groups()), 0);
  std::vector<uint64_t> token_bytes(static_cast<size_t>(groups.n_groups()), 0);
  for (int l = 0; l < fp.n_layer; ++l) {
    const size_t g = static_cast<size_t>(groups.group_of_layer[static_cast<size_t>(l)]);
    token_bytes[g] += fp.layer_kv_bytes(l);
    if (fp.kv_source(l) >= 0)
      ++shared[g];
    else if (!fp.recurrent(l))
      ++kv_layers[g];
  }
  const auto full = static_cast<int32_t>(std::clamp<int64_t>(blocks, 0, planner_detail::kMaxBlocks));
  const std::vector<int32_t> counts =
      kv_group_blocks(groups, block_size, max_num_seqs, fp.max_batched_tokens, full);
  std::vector<Plan::KvGroupPlan> out;
  for (int32_t g = 0; g < groups.n_groups(); ++g) {
    const int32_t n = counts[static_cast<size_t>(g)];
    out.push_back({groups.windows[static_cast<size_t>(g)], kv_layers[static_cast<size_t>(g)],
                   shared[static_cast<size_t>(g)], token_bytes[static_cast<size_t>(g)],
                   static_cast<int64_t>(n) * block_size, n});
  }
  return out;
}

void set_kv_sharing(Plan& p, const ModelFootprint& fp) {
  p.shared_kv_layers = fp.n_shared_kv();
  p.all_layers_kv_bytes_per_token = 0;
  p.unshared_kv_bytes_per_token = 0;
  for (int l = 0; l < fp.n_layer; ++l) {
    p.all_layers_kv_bytes_per_token += fp.layer_kv_bytes(l);
    p.unshared_kv_bytes_per_token += fp.unshared_layer_kv_bytes(l);
  }
}

}  // namespace pagellm

namespace pagellm::planner_detail {

StateCheckpointPlan checkpoint_plan(const ModelFootprint& fp, const PlanRequest& req) {
  if (fp.n_recurrent() == 0 || !req.prefix_caching) return {};
  uint64_t kv_per_token = 0;
  for (int l = 0; l < fp.n_layer; ++l) kv_per_token += fp.layer_kv_bytes(l);
  const int64_t max_seq_len = req.max_seq_len > 0 ? req.max_seq_len : fp.n_ctx_train;
  return plan_state_checkpoints(fp.state_bytes_per_seq(), kv_per_token, req.block_size, max_seq_len);
}

CostModel::CostModel(const PlanRequest& req, const ModelFootprint& fp,
                     std::vector<PlanDevice> devices)
    : req_(req), fp_(fp), dev_(std::move(devices)) {
  n_ = fp.n_layer;
  k_ = static_cast<int>(dev_.size()) - 1;
  prefix_.assign(static_cast<size_t>(n_) + 1, 0);
  for (int l = 0; l < n_; ++l)
    prefix_[static_cast<size_t>(l) + 1] =
        prefix_[static_cast<size_t>(l)] + fp.layer_weight_bytes[static_cast<size_t>(l)];
  for (const auto& d : dev_) {
    std::vector<int32_t> bad(static_cast<size_t>(n_) + 1, 0);
    for (int l = 0; l < n_; ++l) {
      bool ok = true;
      if (static_cast<size_t>(l) < fp.layer_types.size())
        for (DType t : fp.layer_types[static_cast<size_t>(l)]) ok = ok && d.runs_weight_type(t);
      bad[static_cast<size_t>(l) + 1] = bad[static_cast<size_t>(l)] + (ok ? 0 : 1);
    }
    unrunnable_prefix_.push_back(std::move(bad));
    runs_output_.push_back(d.runs_weight_type(fp.output_type) ? 1 : 0);
  }
  full_prefix_.assign(static_cast<size_t>(n_) + 1, 0);
  recurrent_prefix_.assign(static_cast<size_t>(n_) + 1, 0);
  for (int l = 0; l < n_; ++l) {
    const bool full = layer_window(fp, l) <= 0 && !fp.recurrent(l);
    full_prefix_[static_cast<size_t>(l) + 1] =
        full_prefix_[static_cast<size_t>(l)] + (full ? fp.layer_kv_bytes(l) : 0);
    const uint64_t block = fp.layer_kv_bytes(l) * static_cast<uint64_t>(req.block_size);
    if (full && block > 0 && (min_full_block_bytes_ == 0 || block < min_full_block_bytes_))
      min_full_block_bytes_ = block;
    recurrent_prefix_[static_cast<size_t>(l) + 1] =
        recurrent_prefix_[static_cast<size_t>(l)] + (fp.recurrent(l) ? 1 : 0);
  }
  if (fp.n_shared_kv() > 0) {
    const size_t W = static_cast<size_t>(n_) + 1;
    detached_.assign(W * W, -1);
    for (int s = 0; s <= n_; ++s)
      for (int e = s; e <= n_; ++e)
        for (int l = s; l < n_; ++l) {
          const int src = fp.kv_source(l);
          if (src >= 0 && (l < e) != (src >= s && src < e)) {
            detached_[static_cast<size_t>(s) * W + static_cast<size_t>(e)] = l;
            break;
          }
        }
  }
  // The sequences' slots and the prefix cache's checkpoints, on every device
  // that holds a recurrent layer.
  state_slot_layer_bytes_ =
      fp.state_bytes_per_seq_layer *
      static_cast<uint64_t>(req.max_num_seqs + checkpoint_plan(fp, req).entries);
  // A window layer holds at most its group's need, whatever the block count.
  for (const Plan::KvGroupPlan& g : plan_kv_groups(fp, req.block_size, req.max_num_seqs, kMaxBlocks)) {
    if (g.window <= 0) continue;
    WindowNeed need;
    need.window = g.window;
    need.blocks = g.blocks;
    need.prefix.assign(static_cast<size_t>(n_) + 1, 0);
    for (int l = 0; l < n_; ++l)
      need.prefix[static_cast<size_t>(l) + 1] =
          need.prefix[static_cast<size_t>(l)] +
          (layer_window(fp, l) == g.window && !fp.recurrent(l) ? fp.layer_kv_bytes(l) : 0);
    windows_.push_back(std::move(need));
  }
  for (const auto& d : dev_)
    if (d.device.kind == DeviceKind::kCuda) cuda_runtime_host_ = fp.cuda_host_runtime_bytes;
  if (req.kv_mode == KvMode::kFraction) {
    num_ = static_cast<uint64_t>(std::llround(req.kv_fraction * kFractionScale));
    num_ = std::clamp<uint64_t>(num_, 1, kFractionScale);
    den_ = kFractionScale;
  }
}

i128 CostModel::kv(int s, int e, int64_t blocks) const {
  i128 v = static_cast<i128>(full_token_bytes(s, e)) * blocks;
  for (const auto& wn : windows_) {
    const uint64_t b = wn.prefix[static_cast<size_t>(e)] - wn.prefix[static_cast<size_t>(s)];
    v += static_cast<i128>(b) * std::min(blocks, wn.blocks);
  }
  return v * req_.block_size;
}

int64_t CostModel::max_blocks_within(uint64_t room, const std::vector<LayerRange>& ranges,
                                     uint64_t num, uint64_t den) const {
  int layers = 0;
  uint64_t full = 0;  // bytes per token of the full-attention layers
  for (const auto& r : ranges) {
    layers += r.size();
    full += full_token_bytes(r.begin, r.end);
  }
  if (layers == 0) return kNoBound;
  auto fits = [&](int64_t b) {
    i128 v = 0;
    for (const auto& r : ranges) v += kv(r.begin, r.end, b);
    return static_cast<i128>(den) * v <= static_cast<i128>(num) * room;
  };
  int64_t most_need = 0;
  for (const auto& wn : windows_) most_need = std::max(most_need, wn.blocks);
  if (full == 0) {  // window layers only: their KV stops growing at the largest need
    if (fits(most_need)) return kNoBound;
    return largest_fitting(most_need, fits);
  }
  // Every full layer holds each block: no more blocks than room / (block_size * full).
  const i128 hi = static_cast<i128>(num) * room / (static_cast<i128>(den) * req_.block_size * full);
  if (hi >= static_cast<i128>(kNoBound / 2)) return kNoBound;
  return largest_fitting(static_cast<int64_t>(hi), fits);
}

uint64_t CostModel::weights(int i, int s, int e) const {
  uint64_t w = prefix_[static_cast<size_t>(e)] - prefix_[static_cast<size_t>(s)];
  if (e > s && e == n_)
    w += i == host() ? fp_.output_weight_bytes_on_host : fp_.output_weight_bytes;
  if (i == host()) w += fp_.host_weight_bytes;
  return w;
}

uint64_t CostModel::workspace(int i, int s, int e) const {
  uint64_t w = 0;
  if (e > s) w += fp_.layer_workspace_bytes;
  if (e > s && e == n_) w += fp_.output_workspace_bytes;
  if (i == host()) w += fp_.host_workspace_bytes + cuda_runtime_host_;
  if (e > s && dev(i).device.kind == DeviceKind::kCuda) w += fp_.cuda_matmul_scratch_bytes;
  if (e > s && dev(i).device.kind != DeviceKind::kCuda && fp_.mla_plain_bytes > 0) {
    // MLA's plain form expands the longest sequence's context (model/mla_block.h).
    const int64_t n = req_.max_seq_len > 0 ? req_.max_seq_len : fp_.n_ctx_train;
    if (n >= fp_.mla_plain_min_prompt)
      w += fp_.mla_plain_bytes + fp_.mla_plain_bytes_per_position * static_cast<uint64_t>(n);
  }
  return w;
}

bool CostModel::runs(int i, int s, int e) const {
  if (e <= s) return true;
  const auto& bad = unrunnable_prefix_[static_cast<size_t>(i)];
  if (bad[static_cast<size_t>(e)] != bad[static_cast<size_t>(s)]) return false;
  return e < n_ || runs_output_[static_cast<size_t>(i)];
}

std::optional<std::pair<int, DType>> CostModel::first_unrunnable(int i, int s, int e) const {
  const PlanDevice& d = dev(i);
  for (int l = s; l < e; ++l)
    if (static_cast<size_t>(l) < fp_.layer_types.size())
      for (DType t : fp_.layer_types[static_cast<size_t>(l)])
        if (!d.runs_weight_type(t)) return std::make_pair(l, t);
  if (e > s && e == n_ && !d.runs_weight_type(fp_.output_type))
    return std::make_pair(n_, fp_.output_type);
  return std::nullopt;
}

std::optional<int> CostModel::detached_kv_layer(int i, int s, int e) const {
  if (detached_.empty() || shared(i) || e <= s) return std::nullopt;
  const int l = detached_[static_cast<size_t>(s) * (static_cast<size_t>(n_) + 1) + static_cast<size_t>(e)];
  return l >= 0 ? std::optional<int>(l) : std::nullopt;
}

bool CostModel::own_ok(int i, int s, int e, int64_t blocks) const {
  if (!runs(i, s, e)) return false;
  const i128 v = kv(s, e, blocks);
  if (req_.kv_mode == KvMode::kMemory && v > static_cast<i128>(req_.kv_mem_bytes)) return false;
  if (i == host()) return true;
  const uint64_t f = fixed(i, s, e), c = dev(i).budget_bytes();
  if (f > c) return false;
  return static_cast<i128>(den_) * v <= static_cast<i128>(num_) * (c - f);
}

std::optional<uint64_t> CostModel::spare_bytes(int i, int s, int e, int64_t blocks) const {
  if (!own_ok(i, s, e, blocks)) return std::nullopt;
  if (i == host()) return std::numeric_limits<uint64_t>::max();
  const uint64_t f = fixed(i, s, e), c = dev(i).budget_bytes();
  // den * kv <= num * (c - f - x)  <=>  x <= c - f - ceil(den * kv / num)
  const i128 need = (static_cast<i128>(den_) * kv(s, e, blocks) + num_ - 1) / num_;
  return static_cast<uint64_t>(static_cast<i128>(c - f) - need);
}

CostModel::Dp CostModel::run(int64_t blocks) const {
  const size_t W = static_cast<size_t>(n_) + 1;
  const i128 inf = std::numeric_limits<i128>::max() / 4;
  Dp dp;
  dp.cost.assign((static_cast<size_t>(k_) + 1) * W, inf);
  dp.from.assign((static_cast<size_t>(k_) + 1) * W, -1);
  dp.host_ok.assign(W, 0);
  dp.cost[0] = 0;
  const i128 limit = pool_limit();
  for (int j = 1; j <= k_; ++j) {
    const int d = j - 1;
    for (int p = 0; p <= n_; ++p) {
      const i128 base = dp.cost[static_cast<size_t>(j - 1) * W + static_cast<size_t>(p)];
      if (base >= inf) continue;
      for (int q = p; q <= n_; ++q) {
        // Both the device's own use and its pool use grow with q: stop at the first miss.
        if (!own_ok(d, p, q, blocks)) break;
        if (detached_kv_layer(d, p, q)) continue;
        const i128 c = base + shared_cost(d, p, q, blocks);
        if (c > limit) break;
        i128& best = dp.cost[static_cast<size_t>(j) * W + static_cast<size_t>(q)];
        if (c < best) {
          best = c;
          dp.from[static_cast<size_t>(j) * W + static_cast<size_t>(q)] = p;
        }
      }
    }
  }
  for (int p = 0; p <= n_; ++p) {
    const i128 base = dp.cost[static_cast<size_t>(k_) * W + static_cast<size_t>(p)];
    if (base >= inf || !own_ok(host(), p, n_, blocks)) continue;
    dp.host_ok[static_cast<size_t>(p)] = base + shared_cost(host(), p, n_, blocks) <= limit;
  }
  return dp;
}

bool CostModel::host_layers_allowed(int h) const {
  if (k_ == 0) return h == n_;
  if (req_.no_cpu_offload) return h == 0;
  return true;
}

std::optional<int> CostModel::min_host_layers(int64_t blocks) const {
  const Dp dp = run(blocks);
  for (int h = 0; h <= n_; ++h)
    if (host_layers_allowed(h) && dp.host_ok[static_cast<size_t>(n_ - h)]) return h;
  return std::nullopt;
}

std::vector<LayerRange> CostModel::placement(int64_t blocks, int h) const {
  const Dp dp = run(blocks);
  const size_t W = static_cast<size_t>(n_) + 1;
  std::vector<LayerRange> r(dev_.size());
  int q = n_ - h;
  r[static_cast<size_t>(host())] = {q, n_};
  for (int j = k_; j >= 1; --j) {
    const int p = dp.from[static_cast<size_t>(j) * W + static_cast<size_t>(q)];
    r[static_cast<size_t>(j - 1)] = {p, q};
    q = p;
  }
  return r;
}

std::vector<LayerRange> CostModel::packed_placement(int64_t blocks, int h) const {
  const int m = n_ - h;  // accelerators hold [0, m)
  const size_t W = static_cast<size_t>(m) + 1;
  const i128 inf = std::numeric_limits<i128>::max() / 4;
  // suf[j][q]: least pool use of accelerators j..k-1 holding [q, m).
  std::vector<i128> suf((static_cast<size_t>(k_) + 1) * W, inf);
  suf[static_cast<size_t>(k_) * W + static_cast<size_t>(m)] = 0;
  for (int j = k_ - 1; j >= 0; --j)
    for (int q = 0; q <= m; ++q)
      for (int e = q; e <= m; ++e) {
        if (!own_ok(j, q, e, blocks)) break;
        if (detached_kv_layer(j, q, e)) continue;
        const i128 rest = suf[static_cast<size_t>(j + 1) * W + static_cast<size_t>(e)];
        if (rest >= inf) continue;
        i128& best = suf[static_cast<size_t>(j) * W + static_cast<size_t>(q)];
        best = std::min(best, rest + shared_cost(j, q, e, blocks));
      }
  const i128 budget = pool_limit() - shared_cost(host(), m, n_, blocks);
  std::vector<LayerRange> r(dev_.size());
  r[static_cast<size_t>(host())] = {m, n_};
  i128 used = 0;
  int p = 0;
  for (int j = 0; j < k_; ++j) {
    int take = p;
    for (int q = m; q >= p; --q) {
      const i128 rest = suf[static_cast<size_t>(j + 1) * W + static_cast<size_t>(q)];
      if (rest >= inf || !own_ok(j, p, q, blocks) || detached_kv_layer(j, p, q)) continue;
      if (used + shared_cost(j, p, q, blocks) + rest <= budget) {
        take = q;
        break;
      }
    }
    r[static_cast<size_t>(j)] = {p, take};
    used += shared_cost(j, p, take, blocks);
    p = take;
  }
  return r;
}

int64_t CostModel::search_limit() const {
  // Window layers alone never bound the blocks (their KV stops growing).
  if (min_full_block_bytes_ == 0) return kMaxBlocks;
  // Some device holds a full-attention layer, at least the smallest's block each.
  uint64_t most = 0;
  for (const auto& d : dev_) most = std::max(most, d.budget_bytes());
  int64_t hi = static_cast<int64_t>(std::min<uint64_t>(most / min_full_block_bytes_ + 1, kMaxBlocks));
  if (req_.kv_mode == KvMode::kMemory)
    hi = std::min<int64_t>(hi, static_cast<int64_t>(req_.kv_mem_bytes / min_full_block_bytes_ + 1));
  return hi;
}

std::vector<Bound> CostModel::bounds(const std::vector<LayerRange>& r) const {
  std::vector<Bound> out;
  const BindingLimit mem = fraction() ? BindingLimit::kKvFraction : BindingLimit::kDeviceMemory;
  uint64_t pool_fixed = 0;
  std::vector<LayerRange> pool_ranges;
  for (int i = 0; i <= k_; ++i) {
    const LayerRange& x = r[static_cast<size_t>(i)];
    if (req_.kv_mode == KvMode::kMemory && x.size() > 0)
      out.push_back({i, false, BindingLimit::kKvMem, max_blocks_within(req_.kv_mem_bytes, {x}, 1, 1)});
    if (shared(i)) {
      pool_fixed += fixed(i, x.begin, x.end);
      pool_ranges.push_back(x);
    }
    if (i == host()) continue;
    const uint64_t f = fixed(i, x.begin, x.end), c = dev(i).budget_bytes();
    out.push_back({i, false, f > c ? BindingLimit::kDeviceMemory : mem,
                   f > c ? -1 : max_blocks_within(c - f, {x}, num_, den_)});
  }
  const uint64_t c = dev(host()).budget_bytes();
  out.push_back({host(), true,
                 pool_fixed > c ? BindingLimit::kHostMemory
                 : fraction()   ? BindingLimit::kKvFraction
                                : BindingLimit::kHostMemory,
                 pool_fixed > c ? -1 : max_blocks_within(c - pool_fixed, pool_ranges, num_, den_)});
  return out;
}

int64_t CostModel::max_blocks(const std::vector<LayerRange>& r) const {
  int64_t b = kNoBound;
  for (const auto& x : bounds(r)) b = std::min(b, x.max_blocks);
  return b;
}

std::vector<Deficit> CostModel::deficits(const std::vector<LayerRange>& r, int64_t blocks) const {
  std::vector<Deficit> out;
  auto budget_for = [&](uint64_t f, i128 kv_bytes) -> uint64_t {
    // Smallest budget c with num*(c - f) >= den*kv.
    const i128 extra = (static_cast<i128>(den_) * kv_bytes + num_ - 1) / num_;
    return f + static_cast<uint64_t>(extra);
  };
  const BindingLimit mem = fraction() ? BindingLimit::kKvFraction : BindingLimit::kDeviceMemory;
  uint64_t pool_fixed = 0;
  i128 pool_kv = 0;
  for (int i = 0; i <= k_; ++i) {
    const LayerRange& x = r[static_cast<size_t>(i)];
    const i128 v = kv(x.begin, x.end, blocks);
    if (req_.kv_mode == KvMode::kMemory && v > static_cast<i128>(req_.kv_mem_bytes))
      out.push_back({i, false, BindingLimit::kKvMem, static_cast<uint64_t>(v), req_.kv_mem_bytes});
    if (shared(i)) {
      pool_fixed += fixed(i, x.begin, x.end);
      pool_kv += v;
    }
    if (i == host()) continue;
    const uint64_t need = budget_for(fixed(i, x.begin, x.end), v), c = dev(i).budget_bytes();
    if (need > c) out.push_back({i, false, mem, need, c});
  }
  const uint64_t need = budget_for(pool_fixed, pool_kv), c = dev(host()).budget_bytes();
  if (need > c)
    out.push_back({host(), true, fraction() ? BindingLimit::kKvFraction : BindingLimit::kHostMemory,
                   need, c});
  return out;
}

}  // namespace pagellm::planner_detail
