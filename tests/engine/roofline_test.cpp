// pagellm bench --roofline's runner and its bandwidth probe, on stories260K
// with a small spec: every stage runs and the figures hang together.
#include "engine/roofline.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cpu/bandwidth.h"
#include "backend/cpu/cpu_backend.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

TEST(Bandwidth, MeasuresPositiveRates) {
  ThreadPool pool(2);
  cpu::Bandwidth bw = cpu::measure_bandwidth(pool, size_t{16} << 20, 2);
  EXPECT_GT(bw.read_bytes_per_s, 1e8);
  EXPECT_GT(bw.triad_bytes_per_s, 1e8);
  EXPECT_EQ(bw.buffer_bytes % 8192, 0u);
}

// The probe through the Backend interface: host RAM from the CPU backend on
// its pool, read and triad or read alone; no thread pool, no probe.
TEST(Bandwidth, TheCpuBackendProbesHostMemory) {
  ThreadPool pool(2);
  cpu::CpuBackend host(&pool);
  const MemoryBandwidth full = host.measure_host_bandwidth(/*read_only=*/false);
  EXPECT_GT(full.read_bytes_per_s, 1e8);
  EXPECT_GT(full.triad_bytes_per_s, 1e8);
  const MemoryBandwidth read = host.measure_host_bandwidth(/*read_only=*/true);
  EXPECT_GT(read.read_bytes_per_s, 1e8);
  EXPECT_EQ(read.triad_bytes_per_s, 0);
  EXPECT_EQ(host.measure_read_bandwidth(), 0);  // no memory of its own
  cpu::CpuBackend no_pool;
  EXPECT_THROW(no_pool.measure_host_bandwidth(true), Error);
}

TEST(Roofline, EveryStageReportsConsistentFigures) {
  auto model = ModelRunner::load(test::data_path("stories260K.gguf"));
  auto tok = Tokenizer::from_gguf(model->file());
  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.prefix_caching = false;
  Engine engine(*model, *tok, pool, cfg);
  RooflineSpec spec;
  spec.decode_prompt = 4;
  spec.decode_gen = 8;
  spec.prefill_lens = {16, 40};
  spec.concurrencies = {1, 3};
  spec.batch_prompt = 4;
  spec.batch_gen = 6;
  std::vector<std::string> stages;
  const uint64_t wbytes = model->weights().streamed_bytes_per_token();
  EXPECT_GT(wbytes, 0u);
  cpu::CpuBackend host(&pool);
  RooflineResult r = run_roofline(engine, host, model->hparams().n_vocab, model->weight_shares(),
                                  spec, [&](const std::string& s) { stages.push_back(s); });
  // Probe, decode, probe again, prefills, the sweep, batch 1 again.
  EXPECT_EQ(stages.size(), 4u + spec.prefill_lens.size() + spec.concurrencies.size());
  EXPECT_GT(r.bandwidth.read_bytes_per_s, 0);
  EXPECT_GT(r.read_bytes_per_s_after, 0);
  EXPECT_DOUBLE_EQ(r.host_read_bytes_per_s,
                   std::max(r.bandwidth.read_bytes_per_s, r.read_bytes_per_s_after));
  EXPECT_GE(r.bandwidth_change(), 0);
  EXPECT_LT(r.bandwidth_change(), 1);
  EXPECT_GT(r.decode_tokens_per_s, 0);
  EXPECT_EQ(r.weight_bytes_per_token, wbytes);  // the shares add up to every matrix once
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_FALSE(r.devices[0].own_memory);
  EXPECT_DOUBLE_EQ(r.decode_ceiling_tokens_per_s,
                   r.host_read_bytes_per_s / static_cast<double>(wbytes));
  EXPECT_DOUBLE_EQ(r.decode_fraction, r.decode_tokens_per_s / r.decode_ceiling_tokens_per_s);
  ASSERT_EQ(r.prefill.size(), 2u);
  for (const auto& p : r.prefill) EXPECT_GT(p.tokens_per_s, 0);
  ASSERT_EQ(r.batched.size(), 2u);
  EXPECT_EQ(r.batched[1].concurrency, 3);
  for (const auto& b : r.batched) {
    EXPECT_GT(b.generated_tokens_per_s, 0);
    EXPECT_GT(b.decode_tokens_per_s, 0);
  }
  // The ratios' base: the faster of the two batch-1 runs.
  EXPECT_GT(r.batch1_again_decode_tokens_per_s, 0);
  EXPECT_DOUBLE_EQ(r.batched_base_decode_tokens_per_s,
                   std::max(r.batch1_again_decode_tokens_per_s, r.batched[0].decode_tokens_per_s));
  // Nothing leaked: every block is back.
  const auto st = engine.stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.blocks.used, 0);
}

// Layers over two devices: one share each, adding up to every weight once;
// the ceiling is the time to stream each device's share at its bandwidth.
TEST(Roofline, CeilingAddsTheDevicesStreamingTimes) {
  auto model =
      ModelRunner::load(test::data_path("stories260K.gguf"),
                       {.placements = {{"cpu:0", 0, 2}, {"host", 2, 5}},
                        .backend_factory = [](const std::string& d) -> std::unique_ptr<Backend> {
                          return std::make_unique<cpu::CpuBackend>(nullptr, /*staged=*/d != "host");
                        }});
  auto tok = Tokenizer::from_gguf(model->file());
  const auto shares = model->weight_shares();
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(shares[0].bytes + shares[1].bytes, model->weights().streamed_bytes_per_token());
  EXPECT_GT(shares[0].bytes, 0u);
  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.num_blocks = 32;
  cfg.prefix_caching = false;
  Engine engine(*model, *tok, pool, cfg);
  RooflineSpec spec;
  spec.decode_prompt = 4;
  spec.decode_gen = 4;
  spec.prefill_lens = {8};
  spec.concurrencies = {1};
  spec.batch_prompt = 4;
  spec.batch_gen = 4;
  cpu::CpuBackend host(&pool);
  const RooflineResult r = run_roofline(engine, host, model->hparams().n_vocab, shares, spec);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_TRUE(r.devices[0].own_memory);  // staged: its own memory, but host RAM underneath
  EXPECT_FALSE(r.devices[1].own_memory);
  double t = 0;
  for (const auto& d : r.devices) {
    EXPECT_GT(d.read_bytes_per_s, 0);
    t += static_cast<double>(d.weight_bytes) / d.read_bytes_per_s;
  }
  EXPECT_DOUBLE_EQ(r.decode_ceiling_tokens_per_s, 1.0 / t);
  EXPECT_GT(r.decode_tokens_per_s, 0);
}

}  // namespace
}  // namespace pagellm
