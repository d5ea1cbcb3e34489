// Property tests over random small cases: the planner's block count and
// number of host layers equal the brute-force optimum over every contiguous
// placement, no plan exceeds any budget, and refusals report the largest
// cache that fits.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

#include "kvcache/kv_cache_storage.h"
#include "kvcache/kv_pool.h"
#include "planner/cost_model.h"
#include "planner/expert_plan.h"
#include "planner/model_footprint.h"
#include "planner/planner.h"
#include "planner_fixtures.h"
#include "util/error.h"

namespace pagellm {
namespace {

using namespace test;

struct Case {
  PlanRequest req;
  ModelFootprint fp;
  std::vector<PlanDevice> devs;
  std::string text;
};

Case random_case(std::mt19937_64& rng, bool experts = false) {
  auto u = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Case c;
  const int32_t n = static_cast<int32_t>(u(1, 6));
  c.fp = synth_model(n, 0, static_cast<uint64_t>(u(1, 8)), static_cast<uint64_t>(u(0, 60)),
                     static_cast<uint64_t>(u(0, 80)), static_cast<uint64_t>(u(0, 80)));
  for (auto& w : c.fp.layer_weight_bytes) w = static_cast<uint64_t>(u(1, 300));
  c.fp.output_weight_bytes_on_host = u(0, 1) ? c.fp.output_weight_bytes : 0;  // tied or not
  c.fp.output_workspace_bytes = static_cast<uint64_t>(u(0, 40));
  c.fp.host_workspace_bytes = static_cast<uint64_t>(u(0, 40));
  const int k = static_cast<int>(u(0, 3));
  for (int i = 0; i < k; ++i) {
    const uint64_t free = static_cast<uint64_t>(u(0, 2500));
    const uint64_t room = static_cast<uint64_t>(u(0, 100));
    c.devs.push_back(u(0, 1) ? gpu(i, free, room) : vcpu(i, free, room));
  }
  c.devs.push_back(host(static_cast<uint64_t>(u(0, 5000)), static_cast<uint64_t>(u(0, 300))));
  c.req = request(u(1, 64), static_cast<int32_t>(u(1, 8)), static_cast<int32_t>(1 << u(0, 2)));
  if (u(0, 2) == 0) c.req.min_kv_tokens = u(1, 64);
  switch (u(0, 3)) {
    case 0:
      break;
    case 1:
      c.req.kv_mode = KvMode::kTokens;
      c.req.kv_tokens = u(1, 300);
      break;
    case 2:
      c.req.kv_mode = KvMode::kMemory;
      c.req.kv_mem_bytes = static_cast<uint64_t>(u(1, 1500));
      break;
    case 3: {
      static const double fractions[] = {0.1, 0.25, 1.0 / 3, 0.5, 0.9, 1.0};
      c.req.kv_mode = KvMode::kFraction;
      c.req.kv_fraction = fractions[u(0, 5)];
      break;
    }
  }
  c.req.no_cpu_offload = k > 0 && u(0, 3) == 0;
  // Sliding-window layers (KV groups) in a third of the cases.
  if (u(0, 2) == 0) {
    static const int32_t windows[] = {0, 5, 16, 40};
    for (int32_t l = 0; l < n; ++l) c.fp.layer_windows.push_back(windows[u(0, 3)]);
    c.fp.max_batched_tokens = static_cast<int32_t>(u(1, 48));
    c.text += " windows";
  }
  // Mixture of experts (when asked, in 3 of 4 cases): part of each layer's bytes
  // are its experts, which the planner may leave on the host.
  if (experts && u(0, 3) != 0) {
    c.fp.layer_expert_bytes.assign(static_cast<size_t>(n), 0);
    for (int32_t l = 0; l < n; ++l) {
      const uint64_t x = static_cast<uint64_t>(u(1, 400));
      c.fp.layer_expert_bytes[static_cast<size_t>(l)] = x;
      c.fp.layer_weight_bytes[static_cast<size_t>(l)] += x;
    }
    c.fp.expert_read_fraction = 0.25;
    c.fp.host_expert_workspace_bytes = static_cast<uint64_t>(u(0, 50));
  }
  c.text = "n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " mode=" + std::to_string(static_cast<int>(c.req.kv_mode)) +
           " no_offload=" + std::to_string(c.req.no_cpu_offload);
  // Hybrid models (recurrent layers: a fixed state per sequence slot, no K/V)
  // in a third of the cases; at least one layer keeps K/V.
  if (u(0, 2) == 0) {
    c.fp.layer_recurrent.assign(static_cast<size_t>(n), false);
    c.fp.layer_windows.resize(static_cast<size_t>(n), 0);
    for (int32_t l = 0; l + 1 < n; ++l)
      if (u(0, 1)) {
        c.fp.layer_recurrent[static_cast<size_t>(l)] = true;
        c.fp.layer_windows[static_cast<size_t>(l)] = 0;
      }
    c.fp.state_bytes_per_seq_layer = static_cast<uint64_t>(u(1, 60));
    c.text += " recurrent=" + std::to_string(c.fp.n_recurrent());
  }
  return c;
}

TEST(PlannerProperty, MatchesBruteForceAndStaysWithinBudgets) {
  std::mt19937_64 rng(20240611);
  int fits = 0, refused = 0, offloaded = 0, balanced_multi = 0, hybrids = 0, state_matters = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    const Case c = random_case(rng);
    const Expected e = brute_force(c.req, c.fp, c.devs);
    if (c.fp.n_recurrent() > 0) {
      // The state changes the optimum in some cases (so it is charged).
      ModelFootprint stateless = c.fp;
      stateless.state_bytes_per_seq_layer = 0;
      const Expected e0 = brute_force(c.req, stateless, c.devs);
      ++hybrids;
      state_matters += e0.fits != e.fits || e0.blocks != e.blocks || e0.host_layers != e.host_layers;
    }
    try {
      const Plan p = make_plan(c.req, c.fp, c.devs);
      ASSERT_TRUE(e.fits) << c.text << " (planner fits, brute force does not)";
      ASSERT_EQ(p.num_blocks, e.blocks) << c.text;
      ASSERT_EQ(p.host_layers(), e.host_layers) << c.text;
      ASSERT_EQ(budget_violations(p, c.req, c.devs, &c.fp), "") << c.text;
      // The chosen placement holds at least the planned blocks.
      std::vector<LayerRange> r;
      std::vector<PlanDevice> ordered;
      for (const auto& d : p.devices) {
        r.push_back(d.has_layers() ? LayerRange{d.first_layer, d.last_layer + 1} : LayerRange{});
        for (const auto& in : c.devs)
          if (in.device == d.device) ordered.push_back(in);
      }
      // Empty ranges anywhere are fine for the cost model as long as the host is last.
      ASSERT_GE(max_blocks_for_placement(c.req, c.fp, ordered, r), p.num_blocks) << c.text;
      ++fits;
      offloaded += p.host_layers() > 0 && c.devs.size() > 1;
      int with_layers = 0;
      for (const auto& d : p.devices) with_layers += d.has_layers();
      balanced_multi += with_layers > 1;
    } catch (const PlanError& err) {
      ASSERT_FALSE(e.fits) << c.text << ": " << err.what();
      ASSERT_EQ(err.largest_kv_tokens(), e.largest < 0 ? -1 : e.largest * c.req.block_size)
          << c.text << ": " << err.what();
      ++refused;
    }
  }
  // The random cases exercise every outcome.
  EXPECT_GT(fits, 1000);
  EXPECT_GT(refused, 300);
  EXPECT_GT(offloaded, 100);
  EXPECT_GT(balanced_multi, 300);
  EXPECT_GT(hybrids, 700);
  EXPECT_GT(state_matters, 100);
  std::printf("%d hybrid cases, %d where the state changes the plan\n", hybrids, state_matters);
}

// The prefix cache's host tier (--cache-host) and the disk tier's read-ahead
// staging (--cache-dir) are fixed host RAM: every plan with them stays
// within every budget (the host pool's included), and equals the plan
// without them on a host with that much less free memory.
TEST(PlannerProperty, HostTierIsChargedToHostRam) {
  std::mt19937_64 rng(54);
  int fits = 0, changed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Case c = random_case(rng);
    const uint64_t budget = c.devs.back().budget_bytes();
    if (budget == 0) continue;
    const uint64_t tier = std::uniform_int_distribution<uint64_t>(1, budget)(rng);
    std::vector<PlanDevice> smaller = c.devs;
    smaller.back().free_bytes -= tier;
    PlanRequest with = c.req;
    const uint64_t staging = std::uniform_int_distribution<uint64_t>(0, tier)(rng);
    with.host_tier_bytes = tier - staging;
    with.disk_staging_bytes = staging;
    std::optional<Plan> p, ref;
    int64_t p_largest = 0, ref_largest = 0;
    try {
      p = make_plan(with, c.fp, c.devs);
    } catch (const PlanError& e) {
      p_largest = e.largest_kv_tokens();
    }
    try {
      ref = make_plan(c.req, c.fp, smaller);
    } catch (const PlanError& e) {
      ref_largest = e.largest_kv_tokens();
    }
    ASSERT_EQ(p.has_value(), ref.has_value()) << c.text;
    if (!p) {
      ASSERT_EQ(p_largest, ref_largest) << c.text;
      continue;
    }
    ++fits;
    ASSERT_EQ(budget_violations(*p, with, c.devs, &c.fp), "") << c.text;
    ASSERT_EQ(p->devices.back().host_tier_bytes, tier - staging) << c.text;
    ASSERT_EQ(p->devices.back().disk_staging_bytes, staging) << c.text;
    ASSERT_EQ(p->num_blocks, ref->num_blocks) << c.text;
    ASSERT_EQ(p->host_layers(), ref->host_layers()) << c.text;
    try {
      changed += make_plan(c.req, c.fp, c.devs).num_blocks != p->num_blocks;
    } catch (const PlanError&) {
      ++changed;
    }
  }
  EXPECT_GT(fits, 500);
  EXPECT_GT(changed, 100);  // the tier's bytes take cache from the plan in many cases
}

// MLA (deepseek2): a latent cache keeps one row of kv_lora_rank + rope values
// per token and layer. Over random MLA shapes and cache types the footprint
// charges what the runtime's pool holds per token (KvPoolShape with v_dim),
// both equal to the values counted here in the type's blocks; the GQA figure
// is n_head * (q/k head + value head) values; and a plan of random devices
// over that latent cost still equals the brute-force optimum.
TEST(PlannerProperty, LatentCacheIsSizedExactly) {
  std::mt19937_64 rng(20260321);
  auto u = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int fits = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    ModelHParams hp;
    hp.arch = "deepseek2";
    hp.n_layer = static_cast<int32_t>(u(1, 6));
    hp.n_head = static_cast<int32_t>(u(1, 128));
    hp.n_embd = 64;
    hp.n_ff = 64;
    hp.n_vocab = 32;
    hp.n_rot = static_cast<int32_t>(32 * u(1, 2));
    hp.mla.kv_lora_rank = static_cast<int32_t>(32 * u(1, 16));
    hp.mla.qk_nope = static_cast<int32_t>(2 * u(1, 64));
    hp.mla.v_head = static_cast<int32_t>(2 * u(1, 64));
    hp.n_head_kv = 1;
    hp.head_dim = hp.mla.kv_lora_rank + hp.n_rot;
    hp.layers.assign(static_cast<size_t>(hp.n_layer), LayerSpec{});
    static const DType types[] = {DType::F16, DType::F32, DType::Q8_0};
    const DType type = types[u(0, 2)];
    // Bytes of n values of the type, counted by hand: 2 and 4 bytes, or 34
    // bytes per 32 (q8_0).
    const auto bytes_of = [type](uint64_t n) {
      return type == DType::F16 ? 2 * n : type == DType::F32 ? 4 * n : n / 32 * 34;
    };
    FootprintOptions fo;
    fo.kv_type = type;
    const ModelFootprint fp = model_footprint(hp, std::vector<TensorSize>{}, fo);
    const uint64_t latent = bytes_of(static_cast<uint64_t>(hp.head_dim));
    ASSERT_TRUE(fp.latent_kv);
    ASSERT_EQ(fp.kv_bytes_per_token_layer, latent);
    const uint64_t gqa_values = static_cast<uint64_t>(hp.n_head) *
                                (hp.mla.qk_nope + hp.n_rot + hp.mla.v_head);
    ASSERT_EQ(fp.gqa_kv_bytes_per_token_layer, type == DType::Q8_0 ? (gqa_values * 34 + 31) / 32
                                                                   : bytes_of(gqa_values));
    // The plain form's scratch (model/mla_block.h) per context position, f32:
    // latent, k_pe, one head's k_nope and v, its K and V rows of q/k size.
    const uint64_t qk = static_cast<uint64_t>(hp.mla.qk_nope + hp.n_rot);
    ASSERT_EQ(fp.mla_plain_bytes_per_position,
              4 * (hp.mla.kv_lora_rank + hp.n_rot + hp.mla.qk_nope + hp.mla.v_head + 2 * qk));
    KvPoolShape pool;
    pool.layer_end = hp.n_layer;
    pool.num_blocks = static_cast<int32_t>(u(1, 50));
    pool.block_size = static_cast<int32_t>(u(1, 32));
    pool.n_kv_heads = 1;
    pool.head_dim = hp.head_dim;
    pool.dtype = type;
    pool.v_dim = hp.mla.kv_lora_rank;
    ASSERT_EQ(pool.total_bytes(), static_cast<uint64_t>(pool.num_blocks) * pool.block_size *
                                      static_cast<uint64_t>(hp.n_layer) * latent);

    // Plans over that cost: the random case's budgets scaled to it.
    Case c = random_case(rng);
    const uint64_t scale = std::max<uint64_t>(1, latent / 4);
    c.fp.kv_bytes_per_token_layer = latent;
    c.fp.latent_kv = true;
    c.fp.gqa_kv_bytes_per_token_layer = fp.gqa_kv_bytes_per_token_layer;
    for (PlanDevice& d : c.devs) {
      d.free_bytes *= scale;
      d.headroom_bytes *= scale;
    }
    if (c.req.kv_mode == KvMode::kMemory) c.req.kv_mem_bytes *= scale;
    const Expected e = brute_force(c.req, c.fp, c.devs);
    try {
      const Plan p = make_plan(c.req, c.fp, c.devs);
      ASSERT_TRUE(e.fits) << c.text;
      ASSERT_EQ(p.num_blocks, e.blocks) << c.text;
      ASSERT_EQ(p.host_layers(), e.host_layers) << c.text;
      ASSERT_EQ(budget_violations(p, c.req, c.devs, &c.fp), "") << c.text;
      ASSERT_TRUE(p.latent_kv);
      int32_t full = 0;  // layers neither recurrent nor windowed
      for (int32_t l = 0; l < c.fp.n_layer; ++l)
        full += !c.fp.recurrent(l) &&
                (static_cast<size_t>(l) >= c.fp.layer_windows.size() ||
                 c.fp.layer_windows[static_cast<size_t>(l)] == 0);
      ASSERT_EQ(p.kv_bytes_per_token, latent * static_cast<uint64_t>(full)) << c.text;
      ++fits;
    } catch (const PlanError& err) {
      ASSERT_FALSE(e.fits) << c.text << ": " << err.what();
    }
  }
  EXPECT_GT(fits, 300);
}

// Gemma 4: layers with their own KV shapes (heads x head size), some reading
// an earlier layer's cache (same window and shape: LayerSpec::kv_source) and
// keeping none. Over random such models (on the random cases' windows and
// recurrent layers) and cache types:
// - the footprint charges each layer its own K + V bytes per token, counted
//   here by hand, and a sharing layer nothing;
// - the cost model's KV of every layer range at every block count is the naive
//   per-layer sum (naive_layer_blocks), so brute force over placements is over
//   the true costs, and the plan equals its optimum within every budget;
// - the plan's per-token figures are the hand sums (full-attention layers,
//   all layers, and without sharing: each sharing layer at its source's);
// - the storage the runtime builds from the plan (KvCacheStorage with one
//   shape per layer, none for sharing layers) holds the planned bytes on
//   each device.
TEST(PlannerProperty, PerLayerShapesAndSharedKvAreSizedExactly) {
  std::mt19937_64 rng(20261206);
  auto u = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int fits = 0, shared_cases = 0, stored = 0;
  for (int iter = 0; iter < 2500; ++iter) {
    Case c = random_case(rng);
    const int32_t n = c.fp.n_layer;
    c.fp.layer_windows.resize(static_cast<size_t>(n), 0);
    ModelHParams hp;
    hp.arch = "gemma4";
    hp.n_layer = n;
    hp.n_head = 8;
    hp.n_embd = 64;
    hp.n_ff = 64;
    hp.n_vocab = 32;
    hp.layers.assign(static_cast<size_t>(n), LayerSpec{});
    for (int32_t l = 0; l < n; ++l) {
      LayerSpec& s = hp.layers[static_cast<size_t>(l)];
      s.recurrent = c.fp.recurrent(l);
      s.window = c.fp.layer_windows[static_cast<size_t>(l)];
      s.n_head_kv = static_cast<int32_t>(u(1, 4));
      s.head_dim = static_cast<int32_t>(32 * u(1, 4));
      std::vector<int32_t> owners;  // earlier layers with a cache of their own
      for (int32_t j = 0; j < l; ++j)
        if (hp.owns_kv(j)) owners.push_back(j);
      if (!s.recurrent && !owners.empty() && u(0, 1)) {
        s.kv_source = owners[static_cast<size_t>(u(0, static_cast<int64_t>(owners.size()) - 1))];
        const LayerSpec& src = hp.layer(s.kv_source);
        s.window = src.window;
        s.n_head_kv = src.n_head_kv;
        s.head_dim = src.head_dim;
        c.fp.layer_windows[static_cast<size_t>(l)] = s.window;
      }
      hp.n_head_kv = std::max(hp.n_head_kv, s.n_head_kv);
      hp.head_dim = std::max(hp.head_dim, s.head_dim);
    }
    static const DType types[] = {DType::F16, DType::F32, DType::Q8_0};
    const DType type = types[u(0, 2)];
    // Bytes of n values of the type, counted by hand: 2 and 4 bytes, or 34
    // bytes per 32 (q8_0).
    const auto bytes_of = [type](uint64_t v) {
      return type == DType::F16 ? 2 * v : type == DType::F32 ? 4 * v : v / 32 * 34;
    };
    std::vector<uint64_t> own(static_cast<size_t>(n), 0), unshared(static_cast<size_t>(n), 0);
    int32_t n_shared = 0;
    uint64_t most = 1;
    for (int32_t l = 0; l < n; ++l) {
      const LayerSpec& s = hp.layer(l);
      const uint64_t shape = s.recurrent ? 0 : 2 * bytes_of(static_cast<uint64_t>(s.n_head_kv) * s.head_dim);
      own[static_cast<size_t>(l)] = s.kv_source >= 0 ? 0 : shape;
      unshared[static_cast<size_t>(l)] = shape;  // a sharing layer has its source's shape
      n_shared += s.kv_source >= 0;
      most = std::max(most, shape);
    }
    shared_cases += n_shared > 0;
    FootprintOptions fo;
    fo.kv_type = type;
    const ModelFootprint fp = model_footprint(hp, std::vector<TensorSize>{}, fo);
    for (int32_t l = 0; l < n; ++l) ASSERT_EQ(fp.layer_kv_bytes(l), own[static_cast<size_t>(l)]) << l;

    // The random case over these costs, its budgets scaled to them.
    c.fp.kv_type = type;
    c.fp.kv_bytes_per_token_layer = fp.kv_bytes_per_token_layer;
    c.fp.layer_kv_bytes_per_token = fp.layer_kv_bytes_per_token;
    c.fp.layer_kv_source = fp.layer_kv_source;
    const uint64_t scale = std::max<uint64_t>(1, most / 4);
    for (PlanDevice& d : c.devs) {
      d.free_bytes *= scale;
      d.headroom_bytes *= scale;
    }
    if (c.req.kv_mode == KvMode::kMemory) c.req.kv_mem_bytes *= scale;
    const planner_detail::CostModel m(c.req, c.fp, c.devs);
    for (int32_t s = 0; s <= n; ++s)
      for (int32_t e = s; e <= n; ++e)
        for (const int64_t b : {int64_t{0}, int64_t{1}, int64_t{3}, u(4, 60), int64_t{100000}}) {
          uint64_t naive = 0;
          for (int32_t l = s; l < e; ++l)
            naive += own[static_cast<size_t>(l)] * static_cast<uint64_t>(c.req.block_size) *
                     static_cast<uint64_t>(naive_layer_blocks(c.req, c.fp, l, b));
          ASSERT_TRUE(m.kv(s, e, b) == static_cast<planner_detail::i128>(naive))
              << c.text << " layers " << s << "-" << e << " blocks " << b;
        }
    const Expected want = brute_force(c.req, c.fp, c.devs);
    try {
      const Plan p = make_plan(c.req, c.fp, c.devs);
      ASSERT_TRUE(want.fits) << c.text;
      ASSERT_EQ(p.num_blocks, want.blocks) << c.text;
      ASSERT_EQ(p.host_layers(), want.host_layers) << c.text;
      ASSERT_EQ(budget_violations(p, c.req, c.devs, &c.fp), "") << c.text;
      uint64_t full = 0, all = 0, without = 0;
      for (int32_t l = 0; l < n; ++l) {
        full += hp.layer(l).window == 0 ? own[static_cast<size_t>(l)] : 0;
        all += own[static_cast<size_t>(l)];
        without += unshared[static_cast<size_t>(l)];
      }
      ASSERT_EQ(p.kv_bytes_per_token, full) << c.text;
      ASSERT_EQ(p.all_layers_kv_bytes_per_token, all) << c.text;
      ASSERT_EQ(p.unshared_kv_bytes_per_token, without) << c.text;
      ASSERT_EQ(p.shared_kv_layers, n_shared) << c.text;
      // A sharing layer runs where its source's cache is addressable (the
      // runner refuses otherwise): on the same device, or both on devices
      // of host memory.
      for (int32_t l = 0; l < n; ++l) {
        if (hp.layer(l).kv_source < 0) continue;
        const DevicePlan& at = p.device_of_layer(l);
        const DevicePlan& src = p.device_of_layer(hp.layer(l).kv_source);
        ASSERT_TRUE(at.device == src.device ||
                    (at.device.shares_host_memory() && src.device.shares_host_memory()))
            << c.text << " layer " << l << " on " << at.name() << ", its source on " << src.name();
      }
      ++fits;
      if (c.fp.n_recurrent() > 0 || p.kv_bytes() > (uint64_t{8} << 20)) continue;
      // The runtime's storage from the plan, per device.
      KvPoolShape base;
      base.layer_end = n;
      base.num_blocks = p.num_blocks;
      base.block_size = p.block_size;
      base.n_kv_heads = hp.n_head_kv;
      base.head_dim = hp.head_dim;
      base.dtype = type;
      for (int32_t l = 0; l < n; ++l)
        base.per_layer.push_back(hp.owns_kv(l) ? KvLayerShape{hp.layer(l).n_head_kv, hp.layer(l).head_dim}
                                               : KvLayerShape{});
      const KvGroups groups = KvGroups::from_layer_windows(c.fp.layer_windows);
      const KvCacheStorage storage(base, p.kv_placements(), {}, &groups, p.kv_group_blocks());
      std::map<std::string, uint64_t> held;
      for (const auto& pool : storage.pools()) {
        const KvPoolShape& ps = pool->shape();
        for (const KvPoolPlacement& pl : storage.placements())
          if (ps.layers.front() >= pl.layer_begin && ps.layers.front() < pl.layer_end)
            held[pl.device] += ps.total_bytes();
      }
      for (const DevicePlan& d : p.devices) ASSERT_EQ(d.kv_bytes, held[d.name()]) << c.text << " " << d.name();
      ++stored;
    } catch (const PlanError& err) {
      ASSERT_FALSE(want.fits) << c.text << ": " << err.what();
    }
  }
  EXPECT_GT(fits, 500);
  EXPECT_GT(shared_cases, 1000);
  EXPECT_GT(stored, 300);
  std::printf("%d plans, %d models sharing KV, %d storages built\n", fits, shared_cases, stored);
}

// Models with experts: attention and KV are placed as well as with every
// expert on the host (brute force: the fewest host layers), the plan keeps
// the cache floor (or the cache asked for) within every budget, and each
// device keeps its layers' experts (from its first layer) as far as they
// fit: one more would break that cache.
TEST(PlannerProperty, ExpertsFillWhatTheCacheFloorLeaves) {
  std::mt19937_64 rng(99);
  int checked = 0, split = 0, refused = 0, fewer_kept = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Case c = random_case(rng, /*experts=*/true);
    if (!c.fp.has_experts()) continue;
    const int32_t n = c.fp.n_layer;
    const std::vector<bool> all(static_cast<size_t>(n), true);
    const ModelFootprint all_on_host = planner_detail::with_experts_on_host(c.fp, all);
    const Expected e = brute_force(c.req, c.req.no_cpu_offload ? c.fp : all_on_host, c.devs);
    Plan p;
    try {
      p = make_plan(c.req, c.fp, c.devs);
    } catch (const PlanError& err) {
      ASSERT_FALSE(e.fits) << c.text << ": " << err.what();
      ++refused;
      continue;
    }
    ASSERT_TRUE(e.fits) << c.text;
    ASSERT_EQ(p.host_layers(), e.host_layers) << c.text;
    ASSERT_EQ(budget_violations(p, c.req, c.devs, &c.fp), "") << c.text;
    // The placement as the cost model sees it: the plan's order and ranges,
    // the experts it left on the host.
    std::vector<PlanDevice> ordered;
    std::vector<LayerRange> ranges;
    for (const auto& d : p.devices) {
      for (const auto& in : c.devs)
        if (in.device == d.device) ordered.push_back(in);
      ranges.push_back(d.has_layers() ? LayerRange{d.first_layer, d.last_layer + 1} : LayerRange{});
    }
    std::vector<bool> flags = p.experts_on_host;
    flags.resize(static_cast<size_t>(n), false);
    const ModelFootprint placed = planner_detail::with_experts_on_host(c.fp, flags);
    ASSERT_GE(max_blocks_for_placement(c.req, placed, ordered, ranges), p.num_blocks) << c.text;
    const int64_t keep = c.req.kv_mode == KvMode::kTokens
                             ? p.num_blocks
                             : std::min<int64_t>(planner_detail::floor_blocks(c.req, c.devs),
                                                 p.num_blocks);
    // Expert bytes add up: every layer's experts once.
    uint64_t experts = 0;
    for (const auto& d : p.devices) experts += d.expert_bytes;
    ASSERT_EQ(experts, c.fp.total_expert_bytes()) << c.text;
    for (size_t i = 0; i + 1 < p.devices.size(); ++i) {
      const auto& d = p.devices[i];
      if (!d.has_layers()) continue;
      // Kept experts are a prefix of the device's layers.
      int32_t kept = 0;
      while (kept < d.n_layers() && !flags[static_cast<size_t>(d.first_layer + kept)]) ++kept;
      for (int32_t l = d.first_layer + kept; l <= d.last_layer; ++l)
        ASSERT_TRUE(flags[static_cast<size_t>(l)]) << c.text;
      if (kept == d.n_layers()) continue;
      ++split;
      std::vector<bool> more = flags;
      more[static_cast<size_t>(d.first_layer + kept)] = false;
      ASSERT_LT(max_blocks_for_placement(c.req, planner_detail::with_experts_on_host(c.fp, more),
                                         ordered, ranges),
                keep)
          << c.text << ": " << d.name() << " has room for one more layer's experts";
    }
    // No other split of the accelerators' layers (same order, same host
    // layers) keeps more expert bytes on them, each device keeping its first
    // layers' experts as far as the cache allows; except rarely (measured: 3
    // of ~1,300), where the split that is best by the devices' own limits
    // breaks the shared host-RAM pool and the planner keeps its first split.
    if (!c.req.no_cpu_offload) {
      uint64_t planned = 0;
      for (size_t i = 0; i + 1 < p.devices.size(); ++i) planned += p.devices[i].expert_bytes;
      uint64_t most = 0;
      for (const auto& r : all_placements(n, ordered.size())) {
        if (r.back().begin != ranges.back().begin && !(r.back().empty() && ranges.back().empty()))
          continue;
        std::vector<bool> f(static_cast<size_t>(n), true);
        for (int32_t l = r.back().begin; l < r.back().end; ++l) f[static_cast<size_t>(l)] = false;
        auto holds = [&](const std::vector<bool>& g) {
          return max_blocks_for_placement(c.req, planner_detail::with_experts_on_host(c.fp, g),
                                          ordered, r) >= keep;
        };
        if (!holds(f)) continue;
        uint64_t kept_bytes = 0;
        for (size_t i = 0; i + 1 < r.size(); ++i)
          for (int32_t l = r[i].begin; l < r[i].end; ++l) {
            std::vector<bool> g = f;
            g[static_cast<size_t>(l)] = false;
            if (!holds(g)) break;
            f = g;
            kept_bytes += c.fp.layer_expert_bytes[static_cast<size_t>(l)];
          }
        most = std::max(most, kept_bytes);
      }
      if (planned < most) ++fewer_kept;
      ASSERT_LE(fewer_kept, checked / 20 + 1) << c.text << ": kept " << planned << " of " << most;
    }
    ++checked;
  }
  EXPECT_GT(checked, 300);
  EXPECT_GT(split, 30);
  EXPECT_GT(refused, 30);
  std::printf("%d plans, %d with experts split between a device and the host, %d keeping less "
              "than the best split\n", checked, split, fewer_kept);
}

TEST(PlannerProperty, ManualMapsHoldWhatTheirPlacementAllows) {
  std::mt19937_64 rng(7);
  int fits = 0, refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Case c = random_case(rng);
    const auto all = all_placements(c.fp.n_layer, c.devs.size());
    const auto& r = all[std::uniform_int_distribution<size_t>(0, all.size() - 1)(rng)];
    DeviceMap map;
    for (size_t i = 0; i < r.size(); ++i)
      if (!r[i].empty()) map.push_back({r[i].begin, r[i].end - 1, c.devs[i].device});
    c.req.device_map = map;
    if (c.req.no_cpu_offload && !r.back().empty()) {
      EXPECT_THROW(make_plan(c.req, c.fp, c.devs), ConfigError);
      continue;
    }
    const int64_t bs = c.req.block_size;
    bool gpu = false;
    for (const auto& d : c.devs) gpu = gpu || d.device.kind == DeviceKind::kCuda;
    const int64_t seqs = c.req.kv_mode == KvMode::kAuto && !gpu
                             ? std::min<int64_t>(c.req.max_num_seqs, 4)
                             : c.req.max_num_seqs;
    const int64_t cap = (c.req.max_seq_len + bs - 1) / bs * seqs;
    const int64_t min_tokens = c.req.min_kv_tokens > 0 ? c.req.min_kv_tokens : c.req.max_seq_len;
    const int64_t floor = std::min(std::max<int64_t>(1, (min_tokens + bs - 1) / bs), cap);
    const int64_t most = max_blocks_for_placement(c.req, c.fp, c.devs, r);
    const int64_t want =
        c.req.kv_mode == KvMode::kTokens ? std::min((c.req.kv_tokens + bs - 1) / bs, cap) : floor;
    try {
      const Plan p = make_plan(c.req, c.fp, c.devs);
      ASSERT_GE(most, want) << c.text;
      ASSERT_EQ(p.num_blocks, c.req.kv_mode == KvMode::kTokens ? want : std::min(most, cap))
          << c.text;
      for (size_t i = 0; i < r.size(); ++i) {
        ASSERT_EQ(p.devices[i].device, c.devs[i].device) << c.text;  // declared order
        ASSERT_EQ(p.devices[i].n_layers(), r[i].size()) << c.text;
      }
      ASSERT_EQ(budget_violations(p, c.req, c.devs, &c.fp), "") << c.text;
      ++fits;
    } catch (const PlanError& e) {
      ASSERT_LT(most, want) << c.text << ": " << e.what();
      ++refused;
    }
  }
  EXPECT_GT(fits, 300);
  EXPECT_GT(refused, 300);
}

}  // namespace
}  // namespace pagellm
