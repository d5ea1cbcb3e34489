// The model's side of recorded layer runs (Backend::begin_layers, CUDA graphs
// on a GPU), without a GPU: a stand-in device backend records the layer
// calls as closures over their argument values (as a graph holds kernel
// arguments, never the host structs they came from) and replays them in
// later steps of the same shape. Tokens must equal the host run bit for bit,
// so a layer call whose arguments change between steps of one shape (which a
// replay would run stale) fails here. Also: a failed recording makes the
// model run the calls again, and an exception cancels the recording.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine_runner.h"
#include "util/error.h"

namespace pagellm {
namespace {

using namespace test;  // engine_runner.h

struct RecordingStats {
  int recorded = 0, replayed = 0, failed = 0, cancelled = 0;
  int plain_runs = 0, plain_runs_ended = 0;  // kRun answers, and their end_layers()
};

class RecordingBackend final : public Backend {
 public:
  bool throw_in_recording = false;  // the next recorded kv_write throws

  // fail_every: every n-th recording fails (0: none). run_first: a shape's
  // first meeting runs the calls plainly (kRun), as the CUDA backend does.
  RecordingBackend(RecordingStats* stats, int fail_every, bool run_first = false)
      : stats_(stats), fail_every_(fail_every), run_first_(run_first) {}

  std::string name() const override { return "recording " + inner_.name(); }
  bool uses_host_memory() const override { return inner_.uses_host_memory(); }
  void set_thread_pool(ThreadPool* pool) override { inner_.set_thread_pool(pool); }
  void* allocate(size_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* p, size_t bytes) noexcept override {
    recordings_.clear();  // a recording may point into p
    inner_.deallocate(p, bytes);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    outside("upload");
    inner_.upload(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    outside("download");
    inner_.download(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override { inner_.copy(dst, src, bytes); }
  using Backend::begin_step;
  void begin_step(const StepInputs& in, std::span<const RopeParams> ropes) override {
    outside("begin_step");
    n_tokens_ = in.n_tokens;
    n_seqs_ = in.n_seqs;
    inner_.begin_step(in, ropes);
  }
  void reserve_matmul(const MatrixView& w, int64_t rows) override {
    inner_.reserve_matmul(w, rows);
  }

  LayerRun begin_layers(int32_t begin, int32_t end) override {
    key_ = {begin, end, n_tokens_, n_seqs_};
    if (auto it = recordings_.find(key_); it != recordings_.end()) {
      for (auto& call : it->second) call();
      ++stats_->replayed;
      return LayerRun::kReplayed;
    }
    if (run_first_ && seen_.insert(key_).second) {
      ++stats_->plain_runs;
      return LayerRun::kRun;
    }
    recording_ = true;
    calls_.clear();
    return LayerRun::kRecord;
  }
  bool end_layers() override {
    if (!recording_) {  // after kRun
      ++stats_->plain_runs_ended;
      return true;
    }
    recording_ = false;
    if (fail_every_ > 0 && ++attempts_ % fail_every_ == 0) {
      ++stats_->failed;
      return false;
    }
    for (auto& call : calls_) call();
    recordings_[key_] = std::move(calls_);
    ++stats_->recorded;
    return true;
  }
  void cancel_layers() noexcept override {
    if (!recording_) return;
    recording_ = false;
    ++stats_->cancelled;
  }

  // The layer calls: run now, or recorded with copies of their arguments.
  using Backend::matmul;
  void matmul(const float* x, int64_t rows, const MatmulOutput* outs, size_t n_outs) override {
    auto [o, w] = copy_outputs(outs, n_outs);
    run([this, x, rows, o = o, w = w]() mutable {
      fix(o, w);
      inner_.matmul(x, rows, o.data(), o.size());
    });
  }
  using Backend::norm_matmul;
  void norm_matmul(const float* x, const float* norm, float eps, float* h, int64_t rows,
                   const MatmulOutput* outs, size_t n_outs) override {
    auto [o, w] = copy_outputs(outs, n_outs);
    run([=, this, o = o, w = w]() mutable {
      fix(o, w);
      inner_.norm_matmul(x, norm, eps, h, rows, o.data(), o.size());
    });
  }
  using Backend::silu_mul_matmul;
  void silu_mul_matmul(float* gate, const float* up, int64_t rows, const MatmulOutput* outs,
                       size_t n_outs) override {
    auto [o, w] = copy_outputs(outs, n_outs);
    run([=, this, o = o, w = w]() mutable {
      fix(o, w);
      inner_.silu_mul_matmul(gate, up, rows, o.data(), o.size());
    });
  }
  void rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t n,
                float eps) override {
    run([=, this] { inner_.rms_norm(x, weight, out, rows, n, eps); });
  }
  void add_inplace(float* x, const float* y, int64_t count) override {
    run([=, this] { inner_.add_inplace(x, y, count); });
  }
  void add_bias(float* x, const float* bias, int64_t rows, int64_t n, int64_t stride) override {
    run([=, this] { inner_.add_bias(x, bias, rows, n, stride); });
  }
  void silu_mul(float* gate, const float* up, int64_t count) override {
    run([=, this] { inner_.silu_mul(gate, up, count); });
  }
  using Backend::rope;
  void rope(float* x, int64_t stride, int32_t n_heads, int32_t head_dim, RopeStyle style,
            int32_t table) override {
    run([=, this] { inner_.rope(x, stride, n_heads, head_dim, style, table); });
  }
  void glu(Activation act, float* gate, const float* up, int64_t count) override {
    run([=, this] { inner_.glu(act, gate, up, count); });
  }
  void kv_write(const KvLayerView& kv, const float* k, const float* v) override {
    if (recording_ && throw_in_recording) {
      throw_in_recording = false;
      throw Error("kv_write failed");
    }
    run([=, this] { inner_.kv_write(kv, k, v); });
  }
  void paged_attention(const KvLayerView& kv, const float* q, float* out, int32_t n_heads,
                       float scale) override {
    run([=, this] { inner_.paged_attention(kv, q, out, n_heads, scale); });
  }

 private:
  void outside(const char* what) const {
    if (recording_) ADD_FAILURE() << what << " while recording layer calls";
  }
  void run(std::function<void()> call) {
    if (recording_)
      calls_.push_back(std::move(call));
    else
      call();
  }
  static std::pair<std::vector<MatmulOutput>, std::vector<MatrixView>> copy_outputs(
      const MatmulOutput* outs, size_t n) {
    std::vector<MatmulOutput> o(outs, outs + n);
    std::vector<MatrixView> w;
    for (size_t i = 0; i < n; ++i) w.push_back(*outs[i].w);
    return {o, w};
  }
  static void fix(std::vector<MatmulOutput>& o, std::vector<MatrixView>& w) {
    for (size_t i = 0; i < o.size(); ++i) o[i].w = &w[i];
  }

  cpu::CpuBackend inner_{nullptr, /*staged=*/true};
  RecordingStats* stats_;
  int fail_every_;
  bool run_first_;
  std::set<std::tuple<int32_t, int32_t, int32_t, int32_t>> seen_;
  int attempts_ = 0;
  int32_t n_tokens_ = 0, n_seqs_ = 0;
  std::tuple<int32_t, int32_t, int32_t, int32_t> key_;
  bool recording_ = false;
  std::vector<std::function<void()>> calls_;
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t>, std::vector<std::function<void()>>>
      recordings_;
};

void check_recorded(const std::string& file, int fail_every, bool run_first = false) {
  Loaded ref = load(file, {.repack = false});
  const int32_t L = ref.model->hparams().n_layer;
  const auto prompts = make_prompts(*ref.tok, 6);
  EngineConfig cfg;
  cfg.num_blocks = 40;
  const auto want = run_all(ref, prompts, cfg, 14);

  RecordingStats stats;
  auto factory = [&](const std::string& device) -> std::unique_ptr<Backend> {
    if (device == "host") return std::make_unique<cpu::CpuBackend>(nullptr, false);
    return std::make_unique<RecordingBackend>(&stats, fail_every, run_first);
  };
  Loaded m = load(file, {.repack = false,
                         .placements = {{"cpu:0", 0, L / 2}, {"host", L / 2, L}},
                         .backend_factory = factory});
  const auto got = run_all(m, prompts, cfg, 14);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << file << " request " << i;
  EXPECT_GT(stats.recorded, 0);
  EXPECT_GT(stats.replayed, 0) << "no step repeated a shape";
  if (fail_every > 0) {
    EXPECT_GT(stats.failed, 0);
  }
  // Every plain run was closed by end_layers (the backend's mark of the
  // layers' end).
  EXPECT_EQ(stats.plain_runs_ended, stats.plain_runs);
  if (run_first) {
    EXPECT_GT(stats.plain_runs, 0);
  }
}

TEST(RecordedLayers, ReplayedStepsGiveTheHostTokens) {
  check_recorded("stories260K.gguf", 0);
  check_recorded("golden/random/rand-qwen2-tok512-Q8_0.gguf", 0);  // bias epilogues
}

TEST(RecordedLayers, FailedRecordingsRunTheCallsAgain) {
  check_recorded("stories260K.gguf", 2);
}

// As the CUDA backend: a shape runs plainly when first met, is recorded the
// second time, replayed after.
TEST(RecordedLayers, ShapesRunPlainlyFirstThenRecorded) {
  check_recorded("stories260K.gguf", 0, /*run_first=*/true);
}

// An exception in a recorded call cancels the recording; the next step
// records and runs as if nothing had happened.
TEST(RecordedLayers, AnExceptionCancelsTheRecording) {
  RecordingStats stats;
  RecordingBackend* dev = nullptr;
  auto factory = [&](const std::string& device) -> std::unique_ptr<Backend> {
    auto b = std::make_unique<RecordingBackend>(&stats, 0);
    if (device == "cpu:0") dev = b.get();
    return b;
  };
  Loaded m = load("stories260K.gguf",
                  {.repack = false, .placements = {{"cpu:0", 0, 5}}, .backend_factory = factory});
  ASSERT_NE(dev, nullptr);
  ModelRunner& model = *m.model;
  BlockAllocator alloc(4);
  KvCacheStorage kv(model.kv_shape(alloc.num_blocks(), 16, DType::F16), model.placements(),
                    [&model](const std::string& d) { return model.backend_for_device(d); });
  BlockTable t(16);
  ASSERT_TRUE(t.reserve(alloc, 8));
  ThreadPool pool(1);
  auto step = [&](int32_t pos, std::vector<float>& logits) {
    Batch b;
    b.add_token(b.add_sequence(t), 7 + pos, pos, true);
    model.forward(b, kv, pool, logits);
  };
  std::vector<float> a, b;
  dev->throw_in_recording = true;
  EXPECT_THROW(step(0, a), Error);
  EXPECT_EQ(stats.cancelled, 1);
  step(0, a);  // recorded now
  step(0, b);  // replayed
  EXPECT_EQ(stats.recorded, 1);
  EXPECT_EQ(stats.replayed, 1);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace pagellm
