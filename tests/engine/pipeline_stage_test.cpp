// Pipeline stages in one process: a runner holding the first layers hands
// each step to a link that runs the later layers on a second runner (its own
// KV pools, the copy-on-write copies carried with the step), as the MPI
// ranks do. The tokens equal one runner's, alone, batched, chunked and
// preempted, for a dense, a windowed and a mixture-of-experts model.
#include <gtest/gtest.h>

#include "engine/engine_runner.h"
#include "engine/kv_runtime.h"
#include "model/pipeline_link.h"

namespace pagellm {
namespace {

using namespace test;

class LocalLink final : public PipelineLink {
 public:
  // parts > 1: steps come split into micro-batches (send / receive).
  LocalLink(const std::string& file, int32_t begin, const EngineConfig& cfg, ThreadPool& pool,
            int32_t parts = 1)
      : pool_(pool), parts_(parts) {
    runner_ = ModelRunner::load(test::data_path(file), {.stage_begin = begin});
    // As an MPI rank builds its stage's caches: the engine config's runtime.
    kv_ = std::make_unique<KvRuntime>(*runner_, cfg.kv_runtime(*runner_));
  }
  std::span<const float> forward_rest(const Batch& batch, std::span<const float> hidden) override {
    for (const BlockCopy& c : batch.copies) kv_->storage().copy_block(c.src, c.dst, c.group);
    ++steps;
    return runner_->forward_stage(batch, kv_->storage(), pool_, hidden);
  }
  int32_t micro_batches() const override { return parts_; }
  void send(const Batch& batch, std::span<const float> hidden) override {
    const auto out = forward_rest(batch, hidden);
    queue_.emplace_back(out.begin(), out.end());
    ++parts_sent;
  }
  std::span<const float> receive(const Batch&) override {
    last_ = std::move(queue_.front());
    queue_.erase(queue_.begin());
    return last_;
  }
  int steps = 0, parts_sent = 0;

 private:
  ThreadPool& pool_;
  int32_t parts_;
  std::vector<std::vector<float>> queue_;
  std::vector<float> last_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<KvRuntime> kv_;
};

std::vector<std::vector<int32_t>> run_split(const std::string& file, int32_t split,
                                            const std::vector<std::vector<int32_t>>& prompts,
                                            EngineConfig cfg, int gen, EngineStats* stats,
                                            int32_t parts = 1) {
  Loaded first;
  first.model = ModelRunner::load(test::data_path(file), {.stage_end = split});
  first.tok = Tokenizer::from_gguf(first.model->file());
  ThreadPool pool(2);
  LocalLink link(file, split, cfg, pool, parts);
  first.model->set_pipeline_link(&link);
  auto out = run_all(first, prompts, cfg, gen, stats);
  EXPECT_GT(link.steps, 0);
  if (parts > 1) {
    EXPECT_GT(link.parts_sent, link.steps / 2) << "steps were not split";
  }
  return out;
}

void check_stages(const std::string& file, int32_t split) {
  Loaded whole = load(file);
  const auto prompts = make_prompts(*whole.tok, 16);
  const int gen = 16;
  EngineConfig cfg;
  cfg.num_blocks = 256;
  cfg.scheduler.max_num_seqs = 32;
  cfg.scheduler.max_batched_tokens = 300;
  const auto want = run_all(whole, prompts, cfg, gen);
  EXPECT_EQ(run_split(file, split, prompts, cfg, gen, nullptr), want) << "batched";
  // Steps split into micro-batches, as over MPI: each part's tokens are the same.
  EXPECT_EQ(run_split(file, split, prompts, cfg, gen, nullptr, 3), want) << "micro-batches";
  cfg.scheduler.max_batched_tokens = 7;
  EXPECT_EQ(run_split(file, split, prompts, cfg, gen, nullptr), want) << "chunked";
  cfg.num_blocks = 12;
  cfg.scheduler.max_batched_tokens = 64;
  EngineStats st;
  EXPECT_EQ(run_split(file, split, prompts, cfg, gen, &st), want) << "preempted";
  EXPECT_GT(st.preemptions, 0u);
  EXPECT_EQ(run_split(file, split, prompts, cfg, gen, &st, 2), want) << "preempted, micro-batches";
}

TEST(PipelineStages, Stories260K) { check_stages("stories260K.gguf", 2); }
TEST(PipelineStages, Gemma2Windows) { check_stages("golden/arch/rand-gemma2-tok512-Q8_0.gguf", 1); }
TEST(PipelineStages, Mixtral) { check_stages("golden/arch/rand-mixtral-tok512-Q8_0.gguf", 1); }

TEST(PipelineStages, RefusesBadStages) {
  EXPECT_THROW(ModelRunner::load(test::data_path("stories260K.gguf"), {.stage_begin = 5}),
               ConfigError);
  EXPECT_THROW(ModelRunner::load(test::data_path("stories260K.gguf"), {.stage_begin = 3, .stage_end = 2}),
               ConfigError);
  // A first stage without a link cannot produce logits.
  Loaded m;
  m.model = ModelRunner::load(test::data_path("stories260K.gguf"), {.stage_end = 2});
  m.tok = Tokenizer::from_gguf(m.model->file());
  ThreadPool pool(1);
  Engine engine(*m.model, *m.tok, pool, solo_config());
  std::string error;
  Request r;
  r.prompt = m.tok->encode("Once");
  r.max_tokens = 2;
  engine.submit(r, [&](const SeqEvent& ev) {
    if (ev.finished) error = ev.error;
  });
  while (engine.has_work()) engine.step();
  EXPECT_NE(error.find("no link"), std::string::npos) << error;
}

}  // namespace
}  // namespace pagellm
