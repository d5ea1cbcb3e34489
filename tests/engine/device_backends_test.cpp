// Layers on devices whose memory is not the host's, run end to end without a
// GPU: the staged CPU backend (backend/cpu/cpu_backend.h) stands in for one.
// Weights are copied to the device at load, each device's KV pool lives in
// its memory, the hidden state and the logits are copied across, exactly as
// with a GPU; the kernels are the CPU's, so tokens must equal the host run
// bit for bit.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine_runner.h"
#include "util/error.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h


void check_staged(const std::string& model_file) {
  // The device layers keep the file's layout, so the reference does too.
  Loaded ref = load(model_file, {.repack = false});
  const int32_t L = ref.model->hparams().n_layer;
  auto prompts = make_prompts(*ref.tok, 12);
  const int gen = 12;
  EngineConfig cfg;
  cfg.num_blocks = 12;  // tight: preemption and recompute
  cfg.scheduler.max_batched_tokens = 40;
  EngineStats st;
  const auto want = run_all(ref, prompts, cfg, gen, &st);
  EXPECT_GT(st.preemptions, 0u);

  const std::vector<std::vector<KvPoolPlacement>> splits = {
      {{"cpu:0", 0, L}},  // everything on the device, output head too
      {{"cpu:0", 0, L / 2}, {"host", L / 2, L}},
      {{"host", 0, 1}, {"cpu:0", 1, L - 1}, {"cpu:1", L - 1, L}}};
  for (const auto& placements : splits) {
    Loaded m = load(model_file,
                    {.repack = false, .placements = placements, .backend_factory = staged_factory});
    EXPECT_GT(m.model->device_weight_bytes(), 0u);
    auto got = run_all(m, prompts, cfg, gen);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(got[i], want[i]) << placements.size() << " devices, request " << i;
    if (placements.size() > 1) {
      EXPECT_GT(m.model->transfer_bytes(), 0u);
    }
    // The KV pools were allocated by the devices' backends.
    ThreadPool pool(1);
    Engine e(*m.model, *m.tok, pool, cfg);
    for (const auto& p : placements)
      EXPECT_NE(m.model->backend_for_device(p.device), nullptr) << p.device;
  }
}

TEST(StagedDevices, Stories260KTokensEqualTheHostRun) {
  check_staged("stories260K.gguf");
}

TEST(StagedDevices, RandomQ4_KTokensEqualTheHostRun) {
  check_staged("golden/random/rand-llama-tok512-Q4_K.gguf");
}

TEST(StagedDevices, Qwen2BiasesTokensEqualTheHostRun) {
  check_staged("golden/random/rand-qwen2-tok512-Q8_0.gguf");
}

// Every architecture family, staged across devices (sliding windows, soft
// caps, GELU, q/k norms and fused projections on a device's backend).
class StagedFamilies : public ::testing::TestWithParam<const char*> {};
TEST_P(StagedFamilies, TokensEqualTheHostRun) {
  check_staged(GetParam());
}
INSTANTIATE_TEST_SUITE_P(
    Arch, StagedFamilies,
    ::testing::Values("golden/arch/rand-qwen3-tok512-Q8_0.gguf",
                      "golden/arch/rand-gemma3-tok512-Q8_0.gguf",
                      "golden/arch/rand-gemma2-tok512-Q8_0.gguf",
                      "golden/arch/rand-phi3-tok512-Q8_0.gguf",
                      "golden/arch/rand-olmo2-tok512-Q8_0.gguf",
                      "golden/arch/rand-llama31-tok512-Q8_0.gguf",
                      "golden/arch/rand-mixtral-tok512-Q8_0.gguf",
                      "golden/arch/rand-qwen3moe-tok512-Q8_0.gguf"),
    [](const auto& info) {
      std::string s = info.param;
      s = s.substr(s.find("rand-") + 5);
      return s.substr(0, s.find("-tok"));
    });

TEST(StagedDevices, LayersCopiedToADeviceStayThere) {
  Loaded m = load("stories260K.gguf", {.placements = {{"cpu:0", 0, 2}, {"host", 2, 5}},
                                       .backend_factory = staged_factory});
  ASSERT_EQ(m.model->hparams().n_layer, 5);
  try {
    m.model->place({{"cpu:0", 0, 3}, {"host", 3, 5}});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("copied to their devices at load (0-1:cpu:0,2-4:host)"),
              std::string::npos)
        << e.what();
  }
  m.model->place({{"cpu:0", 0, 2}, {"host", 2, 5}});  // the same placement is fine
  ThreadPool pool(1);
  EngineConfig cfg;
  cfg.num_blocks = 8;
  Engine e(*m.model, *m.tok, pool, cfg);  // its KV pools on the model's devices
  EXPECT_EQ(e.config().num_blocks, 8);
}

TEST(StagedDevices, BadPlacementsAreRefusedAtLoad) {
  for (const std::vector<KvPoolPlacement>& bad : std::vector<std::vector<KvPoolPlacement>>{
           {{"host", 0, 3}}, {{"host", 1, 5}}, {{"host", 0, 3}, {"cpu:0", 2, 5}}}) {
    EXPECT_THROW(ModelRunner::load(data_path("stories260K.gguf"), {.placements = bad}), ConfigError);
  }
  EXPECT_THROW(ModelRunner::load(data_path("stories260K.gguf"), {.placements = {{"gpu:0", 0, 5}}}),
               ConfigError);
}

}  // namespace
}  // namespace pagellm

namespace pagellm {
namespace {

using namespace test;

// Mixture-of-experts layers on a device with their experts on the host (the
// planner's expert offload): the normed rows go to the host, the experts'
// weighted sum comes back; tokens equal the all-host run, batched, chunked
// and preempted.
void check_experts_on_host(const std::string& model_file) {
  Loaded ref = load(model_file, {.repack = false});
  const int32_t L = ref.model->hparams().n_layer;
  ASSERT_TRUE(ref.model->hparams().moe());
  auto prompts = make_prompts(*ref.tok, 12);
  const int gen = 12;
  EngineConfig cfg;
  cfg.num_blocks = 12;  // tight: preemption and recompute
  cfg.scheduler.max_batched_tokens = 40;
  const auto want = run_all(ref, prompts, cfg, gen);
  struct Split {
    std::vector<KvPoolPlacement> placements;
    std::vector<bool> experts_on_host;
  };
  std::vector<bool> all(static_cast<size_t>(L), true), first_half(static_cast<size_t>(L), false);
  for (int32_t l = 0; l < L / 2; ++l) first_half[static_cast<size_t>(l)] = true;
  const std::vector<Split> splits = {
      {{{"cpu:0", 0, L}}, all},
      {{{"cpu:0", 0, L / 2}, {"host", L / 2, L}}, first_half},
      {{{"cpu:0", 0, 1}, {"cpu:1", 1, L}}, first_half}};
  for (const auto& s : splits) {
    Loaded m = load(model_file, {.repack = false,
                                 .placements = s.placements,
                                 .experts_on_host = s.experts_on_host,
                                 .backend_factory = staged_factory});
    auto got = run_all(m, prompts, cfg, gen);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(got[i], want[i]) << s.placements.size() << " devices, request " << i;
    // The devices hold the attention; the experts stayed on the host.
    uint64_t expert_bytes = 0;
    for (int32_t l = 0; l < L; ++l)
      if (s.experts_on_host[static_cast<size_t>(l)])
        for (MatrixRole r : {MatrixRole::kGateExps, MatrixRole::kUpExps, MatrixRole::kDownExps})
          expert_bytes += m.model->weights().layers[static_cast<size_t>(l)].matrix(r).bytes();
    Loaded with_layers = load(model_file, {.repack = false,
                                           .placements = s.placements,
                                           .backend_factory = staged_factory});
    EXPECT_GT(expert_bytes, 0u);
    EXPECT_EQ(m.model->device_weight_bytes() + expert_bytes,
              with_layers.model->device_weight_bytes());
    // Per-token traffic: the host reads the routed experts of the remote layers.
    uint64_t total = 0;
    for (const auto& share : m.model->weight_shares()) total += share.bytes;
    EXPECT_EQ(total, m.model->weights().streamed_bytes_per_token());
  }
}

TEST(StagedDevices, MixtralExpertsOnTheHost) {
  check_experts_on_host("golden/arch/rand-mixtral-tok512-Q8_0.gguf");
}
TEST(StagedDevices, Qwen3MoeExpertsOnTheHost) {
  check_experts_on_host("golden/arch/rand-qwen3moe-tok512-Q8_0.gguf");
}

TEST(StagedDevices, ExpertPlacementIsChecked) {
  EXPECT_THROW(load("golden/arch/rand-mixtral-tok512-Q8_0.gguf", {.experts_on_host = {true}}),
               ConfigError);
  EXPECT_THROW(load("stories260K.gguf", {.experts_on_host = std::vector<bool>(5, true)}),
               ConfigError);
}

}  // namespace
}  // namespace pagellm
