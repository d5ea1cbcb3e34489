// Faults inside the engine reach only the requests they belong to: KV block
// reservation failing for one sequence, the forward pass failing to grow its
// workspace, an exception while sampling one request, the model file being
// truncated under its mapping. The affected requests end with
// finish_reason "error" and their blocks are freed; the others produce
// exactly the tokens they produce alone; the engine keeps serving.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <thread>

#include "engine/async_engine.h"
#include "engine/engine.h"
#include "support/test_support.h"
#include "util/fault_injector.h"

namespace pagellm {
namespace {

using namespace std::chrono_literals;

struct Model {
  explicit Model(const std::string& path = test::data_path("stories260K.gguf"),
                 ModelLoadOptions opts = {}) {
    model = ModelRunner::load(path, opts);
    tok = Tokenizer::from_gguf(model->file());
  }
  std::unique_ptr<ModelRunner> model;
  std::unique_ptr<Tokenizer> tok;
};

struct Outcome {
  std::vector<int32_t> tokens;  // of sample 0
  std::string reason;           // of sample 0
  std::string error;
  int finished = 0;  // final events, all samples
};

const char* kTexts[] = {"Once upon a time",       "Lily wanted",         "The dog ran",
                        "Tom had a big red ball", "The sun was hot and", "Sam and Sue"};

Request greedy(const Tokenizer& tok, int i, int32_t max_tokens = 20) {
  Request r;
  r.prompt = tok.encode(kTexts[i % 6]);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

EngineConfig config(int32_t max_num_seqs = 64) {
  EngineConfig c;
  c.num_blocks = 128;
  c.block_size = 8;
  c.scheduler.max_num_seqs = max_num_seqs;
  return c;
}

// Submits every request to one engine, runs it dry; outcomes by request id.
std::map<uint64_t, Outcome> run(Engine& e, const std::vector<Request>& reqs) {
  std::map<uint64_t, Outcome> out;
  for (const auto& r : reqs) {
    e.submit(r, [&out](const SeqEvent& ev) {
      Outcome& o = out[ev.request_id];
      if (ev.index == 0 && ev.token >= 0) o.tokens.push_back(ev.token);
      if (!ev.finished) return;
      ++o.finished;
      if (ev.index == 0) {
        o.reason = finish_reason_name(ev.finish_reason);
        o.error = ev.error;
      }
    });
  }
  while (e.has_work()) e.step();
  return out;
}

// Each request's tokens when it runs alone.
std::vector<std::vector<int32_t>> solo(Model& m, const std::vector<Request>& reqs) {
  ThreadPool pool(2);
  std::vector<std::vector<int32_t>> res;
  for (const auto& r : reqs) {
    Engine e(*m.model, *m.tok, pool, config());
    res.push_back(run(e, {r})[1].tokens);
  }
  return res;
}

void expect_blocks_free(Engine& e) {
  EXPECT_EQ(e.kv_manager().allocator().num_used(), 0) << "leaked KV blocks";
  EXPECT_FALSE(e.has_work());
}

TEST(FaultInjection, KvReservationFailureEndsOnlyThatRequest) {
  Model m;
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(greedy(*m.tok, i));
  const auto want = solo(m, reqs);
  // Request 2 fails mid-decode (its 6th reservation); request 3 fails at
  // admission (its first). Sequence ids equal request ids here (n = 1).
  for (auto [key, skip] : {std::pair{2, 5}, {3, 0}}) {
    FaultScope faults;
    FaultInjector::arm("kv.reserve", {.key = key, .skip = skip});
    ThreadPool pool(2);
    Engine e(*m.model, *m.tok, pool, config());
    auto got = run(e, reqs);
    EXPECT_EQ(FaultInjector::fired("kv.reserve"), 1);
    for (int i = 0; i < 4; ++i) {
      const Outcome& o = got[static_cast<uint64_t>(i + 1)];
      EXPECT_EQ(o.finished, 1);
      if (i + 1 == key) {
        EXPECT_EQ(o.reason, "error");
        EXPECT_NE(o.error.find("out of memory while reserving KV cache blocks"), std::string::npos)
            << o.error;
        EXPECT_LT(o.tokens.size(), want[i].size());
      } else {
        EXPECT_EQ(o.reason, "length") << i;
        EXPECT_EQ(o.tokens, want[i]) << i;
      }
    }
    expect_blocks_free(e);
  }
}

TEST(FaultInjection, WorkspaceFailureEndsTheBatchItHitOnly) {
  Model m;
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(greedy(*m.tok, i));
  const auto want = solo(m, reqs);
  ThreadPool pool(2);
  Engine e(*m.model, *m.tok, pool, config(/*max_num_seqs=*/2));
  FaultScope faults;
  // Two sequences run at a time: the 4th step's batch is requests 1 and 2.
  FaultInjector::arm("model.workspace", {.skip = 3});
  auto got = run(e, reqs);
  for (int i = 0; i < 4; ++i) {
    const Outcome& o = got[static_cast<uint64_t>(i + 1)];
    if (i < 2) {
      EXPECT_EQ(o.reason, "error") << i;
      EXPECT_EQ(o.error, "out of memory during the forward pass");
    } else {
      EXPECT_EQ(o.reason, "length") << i;
      EXPECT_EQ(o.tokens, want[i]) << i;
    }
  }
  expect_blocks_free(e);
  // The engine serves on.
  auto after = run(e, {reqs[0]});
  EXPECT_EQ(after.begin()->second.tokens, want[0]);
  expect_blocks_free(e);
}

TEST(FaultInjection, ThrowWhileSamplingOneRequestEndsAllItsSamples) {
  Model m;
  std::vector<Request> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(greedy(*m.tok, i));
  const auto want = solo(m, reqs);
  reqs[1].n = 3;  // its samples share blocks (copy-on-write) when the fault hits
  reqs[1].sampling.temperature = 0.8f;
  reqs[1].sampling.seed = 7;
  FaultScope faults;
  FaultInjector::arm("engine.sample", {.key = 2, .skip = 7});
  ThreadPool pool(2);
  Engine e(*m.model, *m.tok, pool, config());
  auto got = run(e, reqs);
  EXPECT_EQ(got[2].reason, "error");
  EXPECT_EQ(got[2].finished, 3);  // one error event per sample
  EXPECT_NE(got[2].error.find("injected fault while sampling"), std::string::npos) << got[2].error;
  EXPECT_EQ(got[1].tokens, want[0]);
  EXPECT_EQ(got[3].tokens, want[2]);
  expect_blocks_free(e);
}

// Reads a stream to its end.
Outcome drain(RequestStream& s) {
  Outcome o;
  while (!s.finished()) {
    auto ev = s.next(30s);
    if (!ev) {
      ADD_FAILURE() << "stream stalled";
      break;
    }
    if (ev->index == 0 && ev->token >= 0) o.tokens.push_back(ev->token);
    if (ev->finished) {
      ++o.finished;
      if (ev->index == 0) {
        o.reason = finish_reason_name(ev->finish_reason);
        o.error = ev->error;
      }
    }
  }
  return o;
}

TEST(FaultInjection, AsyncEngineKeepsServingTheRest) {
  Model m;
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(greedy(*m.tok, i, 24));
  const auto want = solo(m, reqs);
  FaultScope faults;
  FaultInjector::arm("engine.sample", {.key = 2, .skip = 4});
  FaultInjector::arm("kv.reserve", {.key = 5, .skip = 3});
  ThreadPool pool(2);
  Engine e(*m.model, *m.tok, pool, config());
  {
    AsyncEngine ae(e, 16);
    // Submitted in order from one thread: engine request ids 1..6.
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& r : reqs) streams.push_back(ae.submit(r));
    std::vector<Outcome> got(6);
    std::vector<std::thread> clients;
    for (int i = 0; i < 6; ++i) clients.emplace_back([&, i] { got[i] = drain(*streams[i]); });
    for (auto& c : clients) c.join();
    for (int i = 0; i < 6; ++i) {
      if (i == 1 || i == 4) {
        EXPECT_EQ(got[i].reason, "error") << i;
        EXPECT_FALSE(got[i].error.empty());
      } else {
        EXPECT_EQ(got[i].reason, "length") << i;
        EXPECT_EQ(got[i].tokens, want[i]) << i;
      }
    }
    // Later requests are served normally.
    for (int i = 0; i < 3; ++i) EXPECT_EQ(drain(*ae.submit(reqs[i])).tokens, want[i]);
    EXPECT_EQ(ae.in_flight(), 0);
  }
  expect_blocks_free(e);
}

// A model file truncated while the engine has it mapped: requests end with
// an error naming the file instead of the process dying of SIGBUS.
TEST(FaultInjection, ModelFileTruncatedUnderTheMapping) {
  test::TempPath copy(".gguf");
  std::filesystem::copy_file(test::data_path("stories260K.gguf"), copy.path);
  Model m(copy.path);
  ThreadPool pool(2);
  Engine e(*m.model, *m.tok, pool, config());
  AsyncEngine ae(e, 16);
  const auto want = drain(*ae.submit(greedy(*m.tok, 0)));
  EXPECT_EQ(want.reason, "length");
  ASSERT_EQ(::truncate(copy.path.c_str(), static_cast<off_t>(m.model->file().file_size() / 2)), 0);
  for (int i = 0; i < 2; ++i) {
    const Outcome o = drain(*ae.submit(greedy(*m.tok, i)));
    EXPECT_EQ(o.reason, "error");
    EXPECT_NE(o.error.find("was truncated while in use"), std::string::npos) << o.error;
    EXPECT_NE(o.error.find(copy.path), std::string::npos) << o.error;
  }
  EXPECT_EQ(ae.in_flight(), 0);
}

// Read into memory (--no-mmap), the model does not depend on the file anymore.
TEST(FaultInjection, ModelReadIntoMemoryIgnoresTruncation) {
  test::TempPath copy(".gguf");
  std::filesystem::copy_file(test::data_path("stories260K.gguf"), copy.path);
  Model m(copy.path, {.use_mmap = false});
  ThreadPool pool(2);
  Engine e(*m.model, *m.tok, pool, config());
  const auto before = run(e, {greedy(*m.tok, 0)});
  ASSERT_EQ(::truncate(copy.path.c_str(), 100), 0);
  const auto after = run(e, {greedy(*m.tok, 0)});
  EXPECT_EQ(after.begin()->second.reason, "length");
  EXPECT_EQ(after.begin()->second.tokens, before.begin()->second.tokens);
}

}  // namespace
}  // namespace pagellm
