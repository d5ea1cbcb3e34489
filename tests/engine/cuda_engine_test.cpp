// The CUDA backend end to end, on a GPU machine (scripts/gpu-check.sh);
// without a GPU each test is skipped by name ("no CUDA device"). A whole
// forward pass against the CPU backend's logits (prefill through cuBLAS,
// decode through the GEMV kernels), and greedy tokens equal to the CPU run on
// one GPU, on one GPU split into two virtual devices, and with layers shared
// between a GPU and the host.
#include <gtest/gtest.h>

#include <map>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>

#include "backend/backend_factory.h"
#include "device/memory_probe.h"
#ifdef PAGELLM_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "engine/engine_runner.h"
#include "model/make_model.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h

bool have_gpu() {
  return cuda_backend_built() && SystemProbe().cuda_device_count() > 0;
}

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

const char* const kModels[] = {"stories260K.gguf",
                               "golden/random/rand-llama-tok512-F16.gguf",
                               "golden/random/rand-llama-tok512-Q4_0.gguf",
                               "golden/random/rand-llama-tok512-Q4_K.gguf",
                               "golden/random/rand-llama-tok512-Q6_K.gguf",
                               "golden/random/rand-llama-tok512-Q8_0.gguf",
                               "golden/random/rand-qwen2-tok512-Q8_0.gguf"};

// Largest |a - b| over the largest |b|.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return diff / scale;
}

// Logits of a two-sequence prefill (37 + 11 tokens, all rows wanted) and of
// the decode step after it.
std::vector<std::vector<float>> two_steps(ModelRunner& model, DType kv_type) {
  const int32_t bs = 16, V = model.hparams().n_vocab;
  BlockAllocator alloc(8);
  KvCacheStorage kv(model.kv_shape(alloc.num_blocks(), bs, kv_type), model.placements(),
                    [&model](const std::string& d) { return model.backend_for_device(d); });
  BlockTable t0(bs), t1(bs);
  EXPECT_TRUE(t0.reserve(alloc, 38));
  EXPECT_TRUE(t1.reserve(alloc, 12));
  ThreadPool pool(2);
  std::vector<std::vector<float>> out(2);
  Batch b;
  const int32_t s0 = b.add_sequence(t0), s1 = b.add_sequence(t1);
  for (int32_t i = 0; i < 37; ++i) b.add_token(s0, (i * 7 + 3) % V, i, true);
  for (int32_t i = 0; i < 11; ++i) b.add_token(s1, (i * 13 + 5) % V, i, true);
  model.forward(b, kv, pool, out[0]);
  b.clear();
  b.add_token(b.add_sequence(t0), 1 % V, 37, true);
  b.add_token(b.add_sequence(t1), 2 % V, 11, true);
  model.forward(b, kv, pool, out[1]);
  return out;
}

TEST(CudaEngine, ForwardLogitsMatchTheCpu) {
  REQUIRE_GPU();
  for (const char* file : kModels) {
    Loaded cpu = load(file, {.repack = false});
    const int32_t L = cpu.model->hparams().n_layer;
    Loaded gpu = load(file, {.placements = {{"cuda:0", 0, L}}});
    for (DType kv : {DType::F16, DType::Q8_0}) {
      // A q8_0 cache needs head_dim % 32 == 0 (stories260K's is 8).
      if (kv == DType::Q8_0 && cpu.model->hparams().head_dim % 32 != 0) continue;
      const auto want = two_steps(*cpu.model, kv);
      const auto got = two_steps(*gpu.model, kv);
      // Activations: Q8 blocks on the CPU; on the GPU Q8_0 blocks for the
      // int8 types up to 128 rows (this prefill's 48 too), f16 for cuBLAS
      // (F16 weights past 32 rows), f32 for the f32 GEMV; a wrong kernel is
      // off by the logits' own size.
      EXPECT_LT(relative_error(got[0], want[0]), 3e-2) << file << " prefill, kv " << dtype_name(kv);
      EXPECT_LT(relative_error(got[1], want[1]), 3e-2) << file << " decode, kv " << dtype_name(kv);
    }
  }
}

// The CPU's margin for its next token after `ids`: top-1 minus top-2 logit,
// over the largest |logit|.
double cpu_margin(ModelRunner& cpu, const std::vector<int32_t>& ids) {
  const int32_t bs = 16;
  BlockAllocator alloc(static_cast<int32_t>(ids.size()) / bs + 2);
  KvCacheStorage kv(cpu.kv_shape(alloc.num_blocks(), bs, DType::F16), cpu.placements());
  BlockTable t(bs);
  EXPECT_TRUE(t.reserve(alloc, static_cast<int64_t>(ids.size())));
  Batch b;
  const int32_t s = b.add_sequence(t);
  for (size_t i = 0; i < ids.size(); ++i)
    b.add_token(s, ids[i], static_cast<int32_t>(i), i + 1 == ids.size());
  ThreadPool pool(2);
  std::vector<float> logits;
  cpu.forward(b, kv, pool, logits);
  std::vector<float> sorted = logits;
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
  double scale = 1e-30;
  for (float v : logits) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  return (sorted[0] - sorted[1]) / scale;
}

// Greedy tokens on `placements` equal the CPU's. The GPU computes with f16
// activations for prompts and other float sums where the CPU uses Q8 blocks, so a
// sequence may part from the CPU's where the CPU itself nearly tied (margin
// under 2%); anywhere else is a failure, and so are partings of more than a
// quarter of the requests (two of the usual eight). Returns the GPU's tokens.
std::vector<std::vector<int32_t>> check_tokens(const std::string& file,
                                               const std::vector<KvPoolPlacement>& placements,
                                               int n_prompts = 8, int max_parted = -1,
                                               const std::vector<bool>& experts_on_host = {}) {
  if (max_parted < 0) max_parted = n_prompts / 4;
  Loaded cpu = load(file);
  auto prompts = make_prompts(*cpu.tok, n_prompts);
  EngineConfig cfg;
  cfg.num_blocks = 8 * n_prompts;  // room for every request at once
  const auto want = run_all(cpu, prompts, cfg, 16);
  Loaded gpu = load(file, {.placements = placements, .experts_on_host = experts_on_host});
  const auto got = run_all(gpu, prompts, cfg, 16);
  int parted = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (got[i] == want[i]) continue;
    size_t k = 0;
    while (k < got[i].size() && k < want[i].size() && got[i][k] == want[i][k]) ++k;
    std::vector<int32_t> ids = prompts[i];
    ids.insert(ids.end(), want[i].begin(), want[i].begin() + static_cast<std::ptrdiff_t>(k));
    const double margin = cpu_margin(*cpu.model, ids);
    EXPECT_LT(margin, 0.02) << file << " on " << placements.front().device << "...: request " << i
                            << " parts from the CPU at token " << k
                            << " where the CPU's choice was clear";
    ++parted;
  }
  EXPECT_LE(parted, max_parted) << file;
  return got;
}

TEST(CudaEngine, GreedyTokensEqualTheCpuOnOneGpu) {
  REQUIRE_GPU();
  for (const char* file : {"stories260K.gguf", "golden/random/rand-llama-tok512-Q8_0.gguf"}) {
    const int32_t L = load(file).model->hparams().n_layer;
    check_tokens(file, {{"cuda:0", 0, L}});
  }
}

// 40 sequences decode together: steps of more rows than the GEMV takes, on
// the int8 tensor-core product (mmq.h).
// Every architecture family on the GPU (GELU, windows with their KV groups,
// soft caps, q/k norms, fused projections, RoPE factors), whole and split
// with the host. These random-weight models are full of near-ties (top-2
// margins down to 2e-4), so on an H200 up to 5 of 8 requests parted, every
// one where the CPU's own margin was under 2%: only that rule holds here,
// with at least one request equal throughout.
TEST(CudaEngine, EveryFamilyGivesTheCpuTokens) {
  REQUIRE_GPU();
  for (const char* file :
       {"golden/arch/rand-qwen3-tok512-Q8_0.gguf", "golden/arch/rand-gemma3-tok512-Q8_0.gguf",
        "golden/arch/rand-gemma2-tok512-Q8_0.gguf", "golden/arch/rand-phi3-tok512-Q8_0.gguf",
        "golden/arch/rand-olmo2-tok512-Q8_0.gguf", "golden/arch/rand-llama31-tok512-Q8_0.gguf",
        "golden/arch/rand-mixtral-tok512-Q8_0.gguf", "golden/arch/rand-qwen3moe-tok512-Q8_0.gguf"}) {
    const int32_t L = load(file).model->hparams().n_layer;
    check_tokens(file, {{"cuda:0", 0, L}}, 8, 7);
    check_tokens(file, {{"cuda:0", 0, L / 2}, {"host", L / 2, L}}, 8, 7);
  }
}

// The 2026 families implemented so far (../shared/golden/arch2026, read from
// there only): smollm3's NoPE layer writes its cache without rotating.
TEST(CudaEngine, Arch2026FamiliesGiveTheCpuTokens) {
  REQUIRE_GPU();
  const std::string file = shared_path("golden/arch2026/rand-smollm3-tok512-Q8_0.gguf");
  if (file.empty()) GTEST_SKIP() << "../shared/golden/arch2026 is absent";
  const int32_t L = load(file).model->hparams().n_layer;
  check_tokens(file, {{"cuda:0", 0, L}}, 8, 7);
  check_tokens(file, {{"cuda:0", 0, L / 2}, {"host", L / 2, L}}, 8, 7);
}

// The issue-56 families on the GPU (../shared/golden/arch2026): gpt-oss
// (clamped SwiGLU, sinks, YaRN, expert biases, softmax of the chosen
// experts), deepseek2 (MLA's latent cache: one KV head, values = the first
// kv_lora_rank of each row) and gemma4 (per-layer inputs, layer output
// scales, an unweighted v norm, KV shared between layers); whole, split with
// the host, and with the experts on the host.
TEST(CudaEngine, GptOssGivesTheCpuTokens) {
  REQUIRE_GPU();
  const std::string file = shared_path("golden/arch2026/rand-openai-moe-tok512-F32.gguf");
  if (file.empty()) GTEST_SKIP() << "../shared/golden/arch2026 is absent";
  const int32_t L = load(file).model->hparams().n_layer;
  check_tokens(file, {{"cuda:0", 0, L}}, 8, 7);
  check_tokens(file, {{"cuda:0", 0, L / 2}, {"host", L / 2, L}}, 8, 7);
  check_tokens(file, {{"cuda:0", 0, L}}, 8, 7, std::vector<bool>(static_cast<size_t>(L), true));
}

TEST(CudaEngine, DeepSeek2GivesTheCpuTokens) {
  REQUIRE_GPU();
  const std::string file = shared_path("golden/arch2026/rand-deepseek2-tok512-F32.gguf");
  if (file.empty()) GTEST_SKIP() << "../shared/golden/arch2026 is absent";
  const int32_t L = load(file).model->hparams().n_layer;
  check_tokens(file, {{"cuda:0", 0, L}}, 8, 7);
  check_tokens(file, {{"cuda:0", 0, L / 2}, {"host", L / 2, L}}, 8, 7);
}

TEST(CudaEngine, Gemma4GivesTheCpuTokens) {
  REQUIRE_GPU();
  const std::string file = shared_path("golden/arch2026/rand-gemma4-tok512-Q8_0.gguf");
  if (file.empty()) GTEST_SKIP() << "../shared/golden/arch2026 is absent";
  const ModelHParams hp = load(file).model->hparams();
  const int32_t L = hp.n_layer;
  check_tokens(file, {{"cuda:0", 0, L}}, 8, 7);
  // The host's layers read the GPU's layers' caches nowhere: only a split
  // that keeps each KV-sharing layer with its source runs; the others are
  // refused when placed.
  int32_t first_sharing = L;
  while (first_sharing > 0 && hp.layers[static_cast<size_t>(first_sharing) - 1].kv_source >= 0)
    --first_sharing;
  ASSERT_LT(first_sharing, L) << "the test file has KV-sharing layers";
  EXPECT_THROW(load(file, {.placements = {{"host", 0, first_sharing}, {"cuda:0", first_sharing, L}}}),
               ConfigError);
}

// make-model files with real models' attention shapes (the golden files'
// heads are small), written once per run: deepseek2 with DeepSeek V3's
// latent (kv_lora_rank 512 + rope 64: cache rows of 576, values 512) and 16
// query heads of 192, and gemma4 with Gemma 4's 512-wide global heads (its
// sliding layers: 256).
std::string real_shape_model(const std::string& arch) {
  static std::map<std::string, std::unique_ptr<TempPath>> made;
  auto& path = made[arch];
  if (!path) {
    path = std::make_unique<TempPath>(".gguf");
    MakeModelSpec spec;
    spec.arch = arch;
    spec.n_embd = 256;
    spec.n_ff = 128;
    spec.type = DType::Q8_0;
    spec.vocab_from = data_path("stories260K.gguf");
    if (arch == "deepseek2") {
      spec.n_layer = 2;
      spec.n_head = 16;
      spec.n_head_kv = 1;
      spec.head_dim = 192;
      spec.rope_dims = 64;
      spec.kv_lora_rank = 512;
    } else {
      spec.n_layer = 4;
      spec.n_head = 4;
      spec.n_head_kv = 2;
      spec.head_dim = 512;
    }
    ThreadPool pool(2);
    make_model(spec, path->path, pool);
  }
  return path->path;
}

TEST(CudaEngine, RealAttentionHeadSizesGiveTheCpuTokens) {
  REQUIRE_GPU();
  for (const char* arch : {"deepseek2", "gemma4"}) {
    const std::string file = real_shape_model(arch);
    const ModelHParams hp = load(file).model->hparams();
    ASSERT_GT(hp.head_dim, 256) << arch;  // past the kernel's small tier
    check_tokens(file, {{"cuda:0", 0, hp.n_layer}}, 8, 7);
  }
}

// Mixture of experts with the experts on the host and attention on the GPU
// (the planner's expert offload): the CPU's tokens, as above.
TEST(CudaEngine, MoeExpertsOnTheHostGiveTheCpuTokens) {
  REQUIRE_GPU();
  for (const char* file :
       {"golden/arch/rand-mixtral-tok512-Q8_0.gguf", "golden/arch/rand-qwen3moe-tok512-Q8_0.gguf"}) {
    const int32_t L = load(file).model->hparams().n_layer;
    check_tokens(file, {{"cuda:0", 0, L}}, 8, 7, std::vector<bool>(static_cast<size_t>(L), true));
  }
}

TEST(CudaEngine, GreedyTokensEqualTheCpuInDecodeBatchesOfForty) {
  REQUIRE_GPU();
  for (const char* file :
       {"golden/random/rand-llama-tok512-Q4_0.gguf", "golden/random/rand-llama-tok512-Q6_K.gguf"}) {
    const int32_t L = load(file).model->hparams().n_layer;
    check_tokens(file, {{"cuda:0", 0, L}}, 40);
  }
}

// Split in two: the same kernels on the same shapes as one GPU, so the same
// tokens bit for bit.
TEST(CudaEngine, GreedyTokensEqualTheCpuOnTwoVirtualGpus) {
  REQUIRE_GPU();
  for (const char* file : {"stories260K.gguf", "golden/random/rand-llama-tok512-Q4_0.gguf"}) {
    const int32_t L = load(file).model->hparams().n_layer;
    const auto one = check_tokens(file, {{"cuda:0", 0, L}});
    const auto two = check_tokens(file, {{"cuda:0", 0, L / 2}, {"cuda:0.1", L / 2, L}});
    EXPECT_EQ(one, two) << file;
  }
}

TEST(CudaEngine, GreedyTokensEqualTheCpuWithHostLayers) {
  REQUIRE_GPU();
  const int32_t L = load("stories260K.gguf").model->hparams().n_layer;
  check_tokens("stories260K.gguf", {{"cuda:0", 0, L - 2}, {"host", L - 2, L}});
  check_tokens("stories260K.gguf", {{"host", 0, 1}, {"cuda:0", 1, L}});
}

// Decode steps replayed from CUDA graphs (the default) give the tokens of
// unrecorded launches (PAGELLM_CUDA_GRAPHS=0) bit for bit, on one GPU and on
// two virtual ones, with 8 sequences (the GEMV) and 40 (mmq); and replays
// happened.
TEST(CudaEngine, RecordedDecodeStepsGiveTheUnrecordedTokens) {
  REQUIRE_GPU();
  for (const char* file : {"stories260K.gguf", "golden/random/rand-llama-tok512-Q4_K.gguf"}) {
    const int32_t L = load(file).model->hparams().n_layer;
    for (const std::vector<KvPoolPlacement>& placements :
         {std::vector<KvPoolPlacement>{{"cuda:0", 0, L}},
          std::vector<KvPoolPlacement>{{"cuda:0", 0, L / 2}, {"cuda:0.1", L / 2, L}}}) {
      setenv("PAGELLM_CUDA_GRAPHS", "0", 1);
      Loaded plain = load(file, {.placements = placements});
      unsetenv("PAGELLM_CUDA_GRAPHS");
      Loaded recorded = load(file, {.placements = placements});
      for (int n : {8, 40}) {
        auto prompts = make_prompts(*plain.tok, n);
        EngineConfig cfg;
        cfg.num_blocks = 8 * n;
        EXPECT_EQ(run_all(recorded, prompts, cfg, 24), run_all(plain, prompts, cfg, 24))
            << file << ", " << placements.size() << " device(s), " << n << " sequences";
      }
#ifdef PAGELLM_CUDA
      for (const auto& p : placements) {
        auto* b = dynamic_cast<cuda::CudaBackend*>(recorded.model->backend_for_device(p.device));
        ASSERT_NE(b, nullptr) << p.device;
        EXPECT_GT(b->graphs().replayed(), 0) << p.device << ": " << b->graphs().off_reason();
      }
#endif
    }
  }
}

// Speculative decoding on the GPU: a verification step is a multi-token
// decode step (its own recorded graph); the tokens must be the GPU's own
// without speculation, alone and with 8 sequences, greedy and sampled.
TEST(CudaEngine, SpeculationGivesTheSameTokensOnTheGpu) {
  REQUIRE_GPU();
  for (const char* file : {"stories260K.gguf", "golden/random/rand-llama-tok512-Q4_0.gguf"}) {
    const int32_t L = load(file).model->hparams().n_layer;
    Loaded gpu = load(file, {.placements = {{"cuda:0", 0, L}}});
    auto prompts = make_prompts(*gpu.tok, 8);
    for (auto& p : prompts) {  // prompts that quote themselves: drafts to verify
      const auto copy = p;
      p.insert(p.end(), copy.begin(), copy.end());
    }
    for (float temperature : {0.0f, 0.8f}) {
      auto run = [&](int32_t ngram, size_t n) {
        EngineConfig cfg;
        cfg.num_blocks = 16 * 8;
        cfg.speculation = {.ngram = ngram, .draft_max = 4, .max_batch = 8};
        ThreadPool pool(2);
        Engine engine(*gpu.model, *gpu.tok, pool, cfg);
        std::map<uint64_t, std::vector<int32_t>> outs;
        std::vector<uint64_t> ids;
        for (size_t i = 0; i < n; ++i) {
          Request r;
          r.prompt = prompts[i];
          r.sampling.temperature = temperature;
          r.sampling.seed = 7 + i;
          r.max_tokens = 24;
          r.ignore_eos = true;
          ids.push_back(engine.submit(r, [&outs](const SeqEvent& ev) {
            if (ev.token >= 0) outs[ev.request_id].push_back(ev.token);
          }));
        }
        while (engine.has_work()) engine.step();
        std::vector<std::vector<int32_t>> res;
        for (uint64_t id : ids) res.push_back(outs[id]);
        return std::make_pair(res, engine.stats().spec_accepted);
      };
      for (size_t n : {size_t{1}, size_t{8}}) {
        const auto plain = run(0, n);
        const auto spec = run(3, n);
        EXPECT_EQ(spec.first, plain.first) << file << ", " << n << " sequences, temperature "
                                           << temperature;
        EXPECT_GT(spec.second, 0u) << file;
      }
    }
  }
}

// Without a GPU (or without CUDA in the build), placing layers on one fails
// cleanly at load.
TEST(GpuPlacement, WithoutAGpuIsAClearError) {
  if (have_gpu()) GTEST_SKIP() << "a CUDA device is present";
  try {
    load("stories260K.gguf", {.placements = {{"cuda:0", 0, 5}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find("cuda:0 is not there") != std::string::npos ||
                msg.find("built without CUDA") != std::string::npos)
        << msg;
  }
}

// The prefix cache's host tier with the pool on the GPU: blocks evicted from
// the pool are downloaded into pinned memory (the backend's allocate_host)
// and uploaded back when the prompt repeats; the repeat gives the first
// run's tokens (a parting only where the CPU itself nearly tied: the repeat
// computes its last prompt token alone, another kernel than the prefill).
TEST(CudaEngine, HostTierRestoresEvictedBlocksThroughPinnedMemory) {
  REQUIRE_GPU();
  Loaded cpu = load("stories260K.gguf");
  const int32_t L = cpu.model->hparams().n_layer;
  Loaded gpu = load("stories260K.gguf", {.placements = {{"cuda:0", 0, L}}});
  std::vector<int32_t> p = make_prompts(*cpu.tok, 1)[0];
  while (p.size() < 100) p.push_back(3 + static_cast<int32_t>(p.size() * 11) % 500);
  const int gen = 12;
  EngineConfig cfg;
  cfg.num_blocks = static_cast<int32_t>((p.size() + gen) / 16 + 2);
  cfg.host_tier.max_bytes = 8 << 20;
  ThreadPool pool(2);
  Engine engine(*gpu.model, *gpu.tok, pool, cfg);
  auto run = [&](const std::vector<int32_t>& prompt) { return run_greedy(engine, prompt, gen); };
  const auto first = run(p);
  for (int k = 0; k < 2; ++k) {
    auto other = p;
    for (auto& t : other) t = 3 + (t * 7 + k * 13) % 500;
    run(other);
  }
  const auto again = run(p);
  const EngineStats st = engine.stats();
  EXPECT_TRUE(st.host.pinned);
  EXPECT_GE(st.host.hits, (p.size() - 1) / 16);
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0);
  size_t k = 0;
  while (k < first.size() && k < again.size() && first[k] == again[k]) ++k;
  if (k < first.size()) {
    std::vector<int32_t> ids = p;
    ids.insert(ids.end(), first.begin(), first.begin() + static_cast<std::ptrdiff_t>(k));
    EXPECT_LT(cpu_margin(*cpu.model, ids), 0.02) << "the repeat parts at token " << k;
  }
}

}  // namespace
}  // namespace pagellm
