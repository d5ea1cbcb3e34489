#include "engine/async_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>

#include "support/test_support.h"

namespace pagellm {
namespace {

using namespace std::chrono_literals;

struct Fixture {
  Fixture() {
    model = ModelRunner::load(test::data_path("stories260K.gguf"));
    tok = Tokenizer::from_gguf(model->file());
  }
  std::unique_ptr<ModelRunner> model;
  std::unique_ptr<Tokenizer> tok;
};

// An engine with `blocks` KV blocks on `threads` threads behind an AsyncEngine.
struct Served {
  Served(Fixture& f, int threads, int32_t blocks, int32_t max_pending)
      : pool(threads), engine(*f.model, *f.tok, pool, config(blocks)), async(engine, max_pending) {}
  static EngineConfig config(int32_t blocks) {
    EngineConfig cfg;
    cfg.num_blocks = blocks;
    return cfg;
  }
  ThreadPool pool;
  Engine engine;
  AsyncEngine async;
};

std::vector<int32_t> drain(RequestStream& s, std::string* reason = nullptr,
                           std::string* error = nullptr) {
  std::vector<int32_t> ids;
  while (!s.finished()) {
    auto ev = s.next(10s);
    if (!ev) break;
    if (ev->token >= 0) ids.push_back(ev->token);
    if (ev->finished && reason) *reason = finish_reason_name(ev->finish_reason);
    if (ev->finished && error) *error = ev->error;
  }
  return ids;
}

Request greedy(const Tokenizer& tok, const std::string& text, int n) {
  Request r;
  r.prompt = tok.encode(text);
  r.max_tokens = n;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

TEST(AsyncEngine, ConcurrentClientsGetTheirSoloResults) {
  Fixture f;
  ThreadPool pool(2);
  EngineConfig cfg;
  cfg.num_blocks = 128;
  const char* texts[] = {"Once upon a time", "Lily wanted", "The dog", "Tom had a big red ball"};
  std::vector<std::vector<int32_t>> solo;
  {
    Engine e(*f.model, *f.tok, pool, cfg);
    AsyncEngine ae(e, 16);
    for (const char* t : texts) {
      auto s = ae.submit(greedy(*f.tok, t, 24));
      solo.push_back(drain(*s));
    }
  }
  Engine e(*f.model, *f.tok, pool, cfg);
  AsyncEngine ae(e, 16);
  std::vector<std::vector<int32_t>> got(8);
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&, i] { got[i] = drain(*ae.submit(greedy(*f.tok, texts[i % 4], 24))); });
  for (auto& c : clients) c.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], solo[i % 4]) << i;
  EXPECT_EQ(ae.in_flight(), 0);
}

TEST(AsyncEngine, CancelFreesBlocksAndErrorsComeBackAsEvents) {
  Fixture f;
  Served served(f, 2, 64, 2);
  AsyncEngine& ae = served.async;
  auto s = ae.submit(greedy(*f.tok, "Once upon a time", 400));
  ASSERT_TRUE(s->next(10s).has_value());  // first token arrived
  s->cancel();
  std::string reason;
  drain(*s, &reason);
  EXPECT_EQ(reason, "abort");
  for (int i = 0; i < 200 && ae.stats().blocks.used != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(ae.stats().blocks.used, 0);

  Request bad;
  bad.prompt = {1, 99999};
  std::string error;
  drain(*ae.submit(bad), &reason, &error);
  EXPECT_EQ(reason, "error");
  EXPECT_NE(error.find("outside the vocabulary"), std::string::npos) << error;
  EXPECT_EQ(ae.in_flight(), 0);
}

// Every sample of a request has exactly one final event, and the request's
// last event says it is the last (SeqEvent::request_finished), also when the
// request ends before its prompt forks into its samples.
TEST(AsyncEngine, TheLastSamplesFinalEventEndsTheRequest) {
  Fixture f;
  for (bool before_fork : {true, false}) {
    SCOPED_TRACE(before_fork ? "aborted before the fork" : "run to the end");
    ThreadPool pool(1);
    Engine engine(*f.model, *f.tok, pool, Served::config(64));
    Request r = greedy(*f.tok, "Once upon a time", 5);
    r.n = 3;
    std::vector<SeqEvent> events;
    const uint64_t id = engine.submit(r, [&](const SeqEvent& ev) { events.push_back(ev); });
    if (before_fork) engine.abort(id);
    while (engine.has_work()) engine.step();
    std::map<int32_t, int> finals;  // by sample index
    for (const SeqEvent& ev : events)
      if (ev.finished) ++finals[ev.index];
    EXPECT_EQ(finals, (std::map<int32_t, int>{{0, 1}, {1, 1}, {2, 1}}));
    ASSERT_FALSE(events.empty());
    EXPECT_TRUE(events.back().request_finished);
    EXPECT_EQ(std::count_if(events.begin(), events.end(),
                            [](const SeqEvent& ev) { return ev.request_finished; }),
              1);
    if (before_fork)
      for (const SeqEvent& ev : events) EXPECT_EQ(ev.finish_reason, FinishReason::kAbort);
  }
  // Through the threaded front: a long prompt prefilled in small chunks,
  // cancelled at once (before its samples fork, as a rule), leaves nothing in flight.
  EngineConfig cfg = Served::config(64);
  cfg.scheduler.max_batched_tokens = 16;
  ThreadPool pool(1);
  Engine engine(*f.model, *f.tok, pool, cfg);
  AsyncEngine ae(engine, 4);
  std::string text;
  for (int i = 0; i < 30; ++i) text += "Once upon a time ";
  Request r = greedy(*f.tok, text, 50);
  r.n = 3;
  auto s = ae.submit(r);
  s->cancel();
  drain(*s);
  EXPECT_TRUE(s->finished());
  for (int i = 0; i < 400 && ae.in_flight() != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(ae.in_flight(), 0);
}

TEST(AsyncEngine, QueueFull) {
  Fixture f;
  Served served(f, 1, 64, 2);
  AsyncEngine& ae = served.async;
  auto a = ae.submit(greedy(*f.tok, "Once", 300));
  auto b = ae.submit(greedy(*f.tok, "Once", 300));
  EXPECT_THROW(ae.submit(greedy(*f.tok, "Once", 3)), QueueFullError);
  a->cancel();
  b->cancel();
  drain(*a);
  drain(*b);
  EXPECT_EQ(ae.in_flight(), 0);
}

TEST(AsyncEngine, EndInFlightNowGivesEveryOpenSampleOneErrorEvent) {
  Fixture f;
  Served served(f, 1, 64, 8);
  AsyncEngine& ae = served.async;
  auto done = ae.submit(greedy(*f.tok, "Once", 2));
  drain(*done);
  auto one = ae.submit(greedy(*f.tok, "Once upon a time", 400));
  Request two_samples = greedy(*f.tok, "Lily wanted", 400);
  two_samples.n = 2;
  two_samples.sampling.temperature = 0.8f;
  auto two = ae.submit(two_samples);
  ASSERT_TRUE(one->next(10s).has_value());
  ASSERT_TRUE(two->next(10s).has_value());

  EXPECT_EQ(ae.end_in_flight_now("the job is ending"), 2);  // not the finished one
  EXPECT_EQ(ae.end_in_flight_now("again"), 0);
  for (auto* s : {&one, &two}) {
    std::map<int32_t, int> finished;  // by sample index
    std::string last_error;
    for (;;) {
      auto ev = (*s)->next(2s);
      if (!ev) break;  // nothing more comes: the engine's later events are dropped
      if (ev->finished) {
        ++finished[ev->index];
        EXPECT_EQ(ev->finish_reason, FinishReason::kError);
        last_error = ev->error;
      }
    }
    EXPECT_TRUE((*s)->finished());
    EXPECT_EQ(finished.size(), static_cast<size_t>(s == &one ? 1 : 2));
    for (auto [index, count] : finished) EXPECT_EQ(count, 1) << index;
    EXPECT_EQ(last_error, "the job is ending");
    (*s)->cancel();
  }
  // The engine itself still ends the requests (it was not waited for): no blocks leak.
  for (int i = 0; i < 400 && (ae.in_flight() != 0 || ae.stats().blocks.used != 0); ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(ae.in_flight(), 0);
  EXPECT_EQ(ae.stats().blocks.used, 0);
}

}  // namespace
}  // namespace pagellm
