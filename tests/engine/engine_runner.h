// Shared by the engine tests: a model with its tokenizer, test prompts, and a
// runner that puts prompts through one engine and returns the greedy tokens.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "support/test_support.h"

namespace pagellm::test {

struct Loaded {
  std::unique_ptr<ModelRunner> model;
  std::unique_ptr<Tokenizer> tok;
};

// `rel`: under tests/data, or an absolute path (a model written by the test).
inline Loaded load(const std::string& rel, ModelLoadOptions opts = {}) {
  Loaded l;
  l.model = ModelRunner::load(rel.starts_with('/') ? rel : test::data_path(rel), std::move(opts));
  l.tok = Tokenizer::from_gguf(l.model->file());
  return l;
}

inline std::vector<std::vector<int32_t>> make_prompts(const Tokenizer& tok, int n) {
  const char* texts[] = {"Once upon a time",
                         "Lily wanted",
                         "The little cat was sad because",
                         "One day, Tom and his dog went to the park.",
                         "Ben had 3 red cars",
                         "The sun was hot and",
                         "Sam and Sue",
                         "In the big forest there"};
  std::mt19937 rng(123);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    auto ids = tok.encode(texts[i % 8]);
    // Vary lengths and content: append random in-vocab ids.
    std::uniform_int_distribution<int> len(0, 20), id(3, tok.n_vocab() - 1);
    for (int k = len(rng) + i % 5; k > 0; --k) ids.push_back(id(rng));
    out.push_back(ids);
  }
  return out;
}

using Outputs = std::map<uint64_t, std::vector<int32_t>>;

// Runs every prompt through one engine (all submitted at once; then
// `before_steps`, if given); returns each request's generated ids in prompt order.
inline std::vector<std::vector<int32_t>> run_all(
    Loaded& m, const std::vector<std::vector<int32_t>>& prompts, EngineConfig cfg, int gen,
    EngineStats* stats = nullptr, const std::function<void(Engine&)>& before_steps = {}) {
  ThreadPool pool(2);
  Engine engine(*m.model, *m.tok, pool, cfg);
  Outputs outs;
  std::vector<uint64_t> ids;
  for (const auto& p : prompts) {
    Request r;
    r.prompt = p;
    r.sampling.temperature = 0;
    r.max_tokens = gen;
    r.ignore_eos = true;
    ids.push_back(engine.submit(r, [&outs](const SeqEvent& ev) {
      if (ev.token >= 0) outs[ev.request_id].push_back(ev.token);
    }));
  }
  if (before_steps) before_steps(engine);
  while (engine.has_work()) engine.step();
  EXPECT_EQ(engine.kv_manager().allocator().num_used(), 0) << "leaked blocks";
  if (stats) *stats = engine.stats();
  std::vector<std::vector<int32_t>> res;
  for (uint64_t id : ids) res.push_back(outs[id]);
  return res;
}

// Runs one greedy request of `prompt` through `engine` to its end; its tokens.
inline std::vector<int32_t> run_greedy(Engine& engine, const std::vector<int32_t>& prompt,
                                       int gen) {
  Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.max_tokens = gen;
  r.ignore_eos = true;
  std::vector<int32_t> got;
  engine.submit(r, [&got](const SeqEvent& ev) {
    if (ev.token >= 0) got.push_back(ev.token);
  });
  while (engine.has_work()) engine.step();
  return got;
}

// "host" is the host; every other device is a staged stand-in for a GPU
// (the CPU backend keeping its own memory).
inline std::unique_ptr<Backend> staged_factory(const std::string& device) {
  return std::make_unique<cpu::CpuBackend>(nullptr, /*staged=*/device != "host");
}

// `rel` with every layer (and so the KV pool) on `device`, a staged stand-in
// for a GPU.
inline Loaded load_on_staged_device(const std::string& rel, const std::string& device) {
  const int32_t L = load(rel, {.repack = false}).model->hparams().n_layer;
  return load(rel,
              {.repack = false, .placements = {{device, 0, L}}, .backend_factory = staged_factory});
}

inline EngineConfig solo_config() {
  EngineConfig c;
  c.num_blocks = 64;
  c.scheduler.max_num_seqs = 1;
  c.prefix_caching = false;
  return c;
}

}  // namespace pagellm::test
