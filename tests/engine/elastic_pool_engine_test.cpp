// The elastic KV pool under the engine: a pool that grows chunk by chunk
// during a run gives the tokens of one populated whole (block ids do not
// change numerics), and so does one whose growth memory refuses (the
// scheduler preempts instead). Under a memory drop read through
// PAGELLM_MEMINFO during generation, the pool shrinks below the new limit
// within a second, no request fails, preempted requests finish with the
// tokens they give alone, and the pool grows back once the file says memory
// is back; the same for a staged device's pool under a drop of its own
// memory read through PAGELLM_DEVICE_MEMINFO.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "device/memory_probe.h"
#include "engine_runner.h"

namespace pagellm::test {
namespace {

namespace fs = std::filesystem;

constexpr int kGen = 40;

EngineConfig batched_config() {
  EngineConfig c;
  c.num_blocks = 512;
  c.scheduler.max_num_seqs = 64;
  c.scheduler.max_batched_tokens = 300;
  return c;
}

size_t pool_resident(const EngineStats& s) {
  size_t n = 0;
  for (const auto& d : s.kv_pool) n += d.resident;
  return n;
}

TEST(ElasticPoolEngine, SameTokensWhenThePoolGrowsDuringTheRun) {
  Loaded m = load("stories260K.gguf");
  auto prompts = make_prompts(*m.tok, 32);
  const auto whole = run_all(m, prompts, batched_config(), kGen);
  EngineConfig elastic = batched_config();
  elastic.elastic_pool = true;
  elastic.pool_chunk_bytes = 40 << 10;  // a few blocks of this model per chunk
  EngineStats st;
  const auto grown = run_all(m, prompts, elastic, kGen, &st);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(grown[i], whole[i]) << "request " << i;
  ASSERT_TRUE(st.elastic_pool);
  EXPECT_GT(st.pool.grows, 2u);
  EXPECT_LT(st.pool.populated_chunks, st.pool.chunks);  // never needed the whole plan
  EXPECT_EQ(pool_resident(st), st.kv_pool[0].resident);
  EXPECT_LT(st.kv_pool[0].resident, st.kv_pool[0].planned);

  // No room above the headroom: chunk 0 only (256 tokens), so the run
  // preempts instead of growing, with the same tokens.
  elastic.pool_chunk_bytes = 160 << 10;
  elastic.memory_room = [] { return int64_t{0}; };
  const auto capped = run_all(m, prompts, elastic, kGen, &st);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(capped[i], whole[i]) << "request " << i;
  EXPECT_GT(st.preemptions, 0u);
  EXPECT_GT(st.pool.refusals, 0u);
  EXPECT_EQ(st.pool.grows, 0u);
  EXPECT_EQ(st.pool.populated_chunks, 1);
}

// Memory as a test's file says: host RAM through PAGELLM_MEMINFO, or with a
// device name, that device's own through PAGELLM_DEVICE_MEMINFO (a
// directory holding a file per device).
struct FakeMeminfo {
  explicit FakeMeminfo(const std::string& device = {})
      : env(device.empty() ? "PAGELLM_MEMINFO" : "PAGELLM_DEVICE_MEMINFO"),
        dir(fs::temp_directory_path() /
            ("pagellm-elastic-" + std::string(device.empty() ? "meminfo-" : "devices-") +
             std::to_string(::getpid()))),
        path(device.empty() ? dir : dir / device) {
    if (!device.empty()) fs::create_directories(dir);
    ::setenv(env, dir.c_str(), 1);
  }
  ~FakeMeminfo() {
    ::unsetenv(env);
    fs::remove_all(dir);
  }
  void write(uint64_t available) const {
    const fs::path tmp = path.string() + ".tmp";
    std::ofstream(tmp) << "MemTotal:       67108864 kB\nMemFree:        1024 kB\nMemAvailable:   "
                       << available / 1024 << " kB\nSwapTotal:      0 kB\nSwapFree:       0 kB\n";
    fs::rename(tmp, path);  // a reader sees the old file or the new one
  }
  const char* env;
  fs::path dir;   // PAGELLM_MEMINFO's file, or PAGELLM_DEVICE_MEMINFO's directory
  fs::path path;  // the file
};

// The pools of the memory under pressure, and (optional) what its backend
// holds, measured apart from the pool's own account.
struct Watched {
  std::function<size_t(const EngineStats&)> pool;
  std::function<size_t()> backend_held;
};

// 32 requests generating on `cfg` (which watches the memory `meminfo`
// simulates, with `headroom`): memory drops to half of what the pool has
// grown to, then comes back.
void check_shrinks_under_a_drop_and_grows_back(Loaded& m, EngineConfig cfg,
                                               const FakeMeminfo& meminfo, uint64_t headroom,
                                               const Watched& watched) {
  auto prompts = make_prompts(*m.tok, 32);
  std::vector<std::vector<int32_t>> solo;
  for (const auto& p : prompts) solo.push_back(run_all(m, {p}, solo_config(), kGen)[0]);

  meminfo.write(uint64_t{8} << 30);
  cfg.elastic_pool = true;
  cfg.pool_chunk_bytes = 80 << 10;
  cfg.memory_check_ms = 20;
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  Outputs outs;
  std::vector<uint64_t> ids;
  int failed = 0;
  for (const auto& p : prompts) {
    Request r;
    r.prompt = p;
    r.sampling.temperature = 0;
    r.max_tokens = kGen;
    r.ignore_eos = true;
    ids.push_back(engine.submit(r, [&](const SeqEvent& ev) {
      if (ev.token >= 0) outs[ev.request_id].push_back(ev.token);
      if (ev.finished && ev.finish_reason == FinishReason::kError) ++failed;
    }));
  }
  // Generate until the pool has grown and every sequence is decoding.
  while (engine.has_work() && engine.stats().generated_tokens < 32 * 10) engine.step();
  const EngineStats before = engine.stats();
  const size_t grown = watched.pool(before);
  const size_t backend_grown = watched.backend_held ? watched.backend_held() : 0;
  ASSERT_GT(before.pool.populated_chunks, 4) << "the pool did not grow";
  // Memory drops: the pool must lose at least half of what it holds.
  const size_t limit = grown / 2;
  meminfo.write(headroom - (grown - limit));
  const auto t0 = std::chrono::steady_clock::now();
  double took = -1;
  while (engine.has_work()) {
    engine.step();
    if (watched.pool(engine.stats()) <= limit) {
      took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      break;
    }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5)) break;
  }
  ASSERT_GE(took, 0) << "the pool did not shrink below " << limit << " bytes";
  EXPECT_LT(took, 1.0);
  const EngineStats low = engine.stats();
  EXPECT_GT(low.pool.shrinks, 0u);
  EXPECT_GT(low.preemptions, before.preemptions);
  if (watched.backend_held) {  // the backend gave back what the pool did
    EXPECT_GE(backend_grown - watched.backend_held(), grown - watched.pool(low));
  }
  // A while under pressure (the pool at its floor), then memory is back.
  for (int i = 0; i < 50 && engine.has_work(); ++i) engine.step();
  const size_t floor = watched.pool(engine.stats());
  EXPECT_LE(floor, limit);
  meminfo.write(uint64_t{8} << 30);
  // The next memory check (every 20 ms here) lets the pool grow at once.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  size_t peak_after = 0;
  while (engine.has_work()) {
    engine.step();
    peak_after = std::max(peak_after, watched.pool(engine.stats()));
  }
  const EngineStats end = engine.stats();
  EXPECT_GT(end.pool.grows, low.pool.grows);
  EXPECT_GT(peak_after, floor) << "the pool did not grow back";
  EXPECT_EQ(failed, 0);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(outs[ids[i]], solo[i]) << "request " << i;
  std::printf(
      "pool %zu KiB, shrank below %zu KiB in %.0f ms (floor %zu KiB), grew back to %zu KiB; "
      "%llu preemptions\n",
      grown >> 10, limit >> 10, took * 1000, floor >> 10, peak_after >> 10,
      static_cast<unsigned long long>(end.preemptions));
}

TEST(ElasticPoolEngine, ShrinksUnderAMemoryDropAndGrowsBack) {
  Loaded m = load("stories260K.gguf");
  FakeMeminfo meminfo;
  const uint64_t headroom = uint64_t{1} << 30;
  // The engine's memory checks as serve wires them (engine_setup), on the
  // fake file alone (no cgroup).
  ProcPaths paths;
  ASSERT_EQ(paths.meminfo, meminfo.path.string());
  paths.cgroup_root = (meminfo.path.string() + ".no-cgroup");
  EngineConfig cfg = batched_config();
  cfg.memory_ok = [&] { return read_host_memory(paths).usable_bytes() >= headroom; };
  cfg.memory_room = [&] {
    return static_cast<int64_t>(read_host_memory(paths).usable_bytes()) -
           static_cast<int64_t>(headroom);
  };
  check_shrinks_under_a_drop_and_grows_back(m, cfg, meminfo, headroom,
                                            {.pool = [](const EngineStats& s) {
                                              return pool_resident(s);
                                            }});
}

// The same for a pool in a device's own memory (the staged CPU backend
// stands in for a GPU): its free memory, read through PAGELLM_DEVICE_MEMINFO
// (CUDA: cudaMemGetInfo), drops and comes back; host memory is not watched.
TEST(ElasticPoolEngine, ADevicePoolShrinksUnderADeviceMemoryDropAndGrowsBack) {
  Loaded m = load_on_staged_device("stories260K.gguf", "cpu:1");
  auto* device = dynamic_cast<cpu::CpuBackend*>(m.model->backend_for_device("cpu:1"));
  ASSERT_NE(device, nullptr);
  FakeMeminfo meminfo("cpu:1");
  const uint64_t headroom = uint64_t{1} << 30;
  EngineConfig cfg = batched_config();
  cfg.device_memory_room = [&](const std::string& name) {
    SystemProbe probe;
    return static_cast<int64_t>(probe.measure(parse_device_name(name)).free_bytes) -
           static_cast<int64_t>(headroom);
  };
  auto device_pool = [](const EngineStats& s) {
    size_t n = 0;
    for (const auto& d : s.kv_pool)
      if (d.device == "cpu:1") {
        EXPECT_TRUE(d.own_memory);
        n += d.resident;
      }
    return n;
  };
  check_shrinks_under_a_drop_and_grows_back(
      m, cfg, meminfo, headroom,
      {.pool = device_pool, .backend_held = [device] { return device->held_bytes(); }});
}

TEST(ElasticPoolEngine, AnUnreadableMemoryProbeFailsNoRequest) {
  Loaded m = load("stories260K.gguf");
  auto prompts = make_prompts(*m.tok, 8);
  const auto expect = run_all(m, prompts, batched_config(), kGen);
  FakeMeminfo meminfo;
  std::ofstream(meminfo.path) << "MemTotal: 1 kB\n";  // no MemAvailable: the probe throws
  EngineConfig cfg = batched_config();
  cfg.elastic_pool = true;
  cfg.pool_chunk_bytes = 40 << 10;
  cfg.memory_check_ms = 0;
  cfg.memory_ok = [] { return read_host_memory().usable_bytes() > 0; };
  cfg.memory_room = [] { return static_cast<int64_t>(read_host_memory().usable_bytes()); };
  const auto got = run_all(m, prompts, cfg, kGen);
  EXPECT_EQ(got, expect);
}

}  // namespace
}  // namespace pagellm::test
