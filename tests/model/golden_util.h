// Shared by the golden tests: runs a prompt through the model alone (one
// prefill batch, then greedy decode steps) and compares with reference JSON.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvcache/block_allocator.h"
#include "kvcache/block_table.h"
#include "kvcache/kv_pool.h"
#include "model/runner.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace pagellm::golden {

using nlohmann::json;

inline json load_json_file(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

inline json load_json(const std::string& rel) { return load_json_file(test::data_path(rel)); }

struct RunResult {
  std::vector<float> last_logits;
  std::vector<int32_t> ids;
};

inline int32_t argmax(const float* x, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = static_cast<int32_t>(i);
  return best;
}

// Prefills `prompt` in one batch, then decodes `n` greedy tokens one at a time.
inline RunResult run_greedy(ModelRunner& model, const std::vector<int32_t>& prompt, int n, DType kv_type,
                     ThreadPool& pool) {
  const int32_t bs = 16;
  const int64_t total = static_cast<int64_t>(prompt.size()) + n;
  BlockAllocator alloc(static_cast<int32_t>((total + bs - 1) / bs));
  KvCacheStorage kv(model.kv_shape(alloc.num_blocks(), bs, kv_type),
                    {{"host", 0, model.hparams().n_layer}}, {}, nullptr, {},
                    model.recurrent_state(1));
  const bool recurrent = model.hparams().has_recurrent();
  // Recurrent layers: slot 0, zeroed first; the prompt's end is where
  // decoding starts (for MLA too: its prompt positions run the plain form).
  auto add_state = [&](Batch& b, bool first) {
    if (recurrent || model.hparams().mla.enabled())
      b.step_from = {static_cast<int32_t>(prompt.size())};
    if (!recurrent) return;
    b.state_slots = {0};
    if (first) b.state_resets = {0};
  };
  BlockTable table(bs);
  EXPECT_TRUE(table.reserve(alloc, total));
  const int64_t V = model.hparams().n_vocab;
  RunResult r;
  std::vector<float> logits;
  Batch b;
  int32_t s = b.add_sequence(table);
  for (size_t i = 0; i < prompt.size(); ++i)
    b.add_token(s, prompt[i], static_cast<int32_t>(i), i + 1 == prompt.size());
  add_state(b, true);
  model.forward(b, kv, pool, logits);
  r.last_logits = logits;
  int32_t pos = static_cast<int32_t>(prompt.size());
  for (int i = 0; i < n; ++i) {
    int32_t next = argmax(logits.data(), V);
    r.ids.push_back(next);
    if (i + 1 == n) break;
    b.clear();
    s = b.add_sequence(table);
    b.add_token(s, next, pos++, true);
    add_state(b, false);
    model.forward(b, kv, pool, logits);
  }
  table.release(alloc);
  EXPECT_EQ(alloc.num_free(), alloc.num_blocks());
  return r;
}

inline double max_abs_diff(const std::vector<float>& a, const json& ref) {
  EXPECT_EQ(a.size(), ref.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < ref.size(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - ref[i].get<double>()));
  return m;
}

// Number of leading greedy steps whose reference top-2 margin is >= min_margin.
inline size_t confident_steps(const json& top2, double min_margin) {
  size_t n = 0;
  for (const auto& s : top2) {
    if (s["logit1"].get<double>() - s["logit2"].get<double>() < min_margin) break;
    ++n;
  }
  return n;
}

inline void expect_prefix_equal(const std::vector<int32_t>& got, const json& want, size_t n,
                         const std::string& what) {
  for (size_t i = 0; i < n && i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i].get<int32_t>()) << what << ": step " << i;
}

inline std::vector<int32_t> ids_of(const json& j) {
  return j.get<std::vector<int32_t>>();
}

// One prompt of an architecture golden (golden/arch, golden/arch2026: llama.cpp
// references): the tokenizer's ids must equal the reference's; the last prompt
// logits run with an F32 KV cache; 16 greedy steps with the default F16 cache
// must equal the reference's up to the first step whose reference top-2
// margin is under 2 x tol. The caller decides whether logit_err must be < tol.
struct ArchCaseResult {
  std::vector<float> last_logits;  // F32 KV cache
  double logit_err = 0;            // max |last_logits - llama.cpp's|
  size_t compared = 0, steps = 0;  // greedy steps compared, of steps
};

inline ArchCaseResult run_arch_case(ModelRunner& model, const Tokenizer& tok, const json& c,
                                    double tol, ThreadPool& pool, const std::string& what) {
  ArchCaseResult out;
  const auto prompt = ids_of(c["prompt_ids"]);
  EXPECT_EQ(tok.encode(c["prompt"].get<std::string>()), prompt) << what << ": prompt ids";
  out.last_logits = run_greedy(model, prompt, 1, DType::F32, pool).last_logits;
  out.logit_err = max_abs_diff(out.last_logits, c["kv_f32"]["last_logits"]);
  const auto& greedy = c["greedy"];
  out.steps = greedy["ids"].size();
  RunResult r = run_greedy(model, prompt, static_cast<int>(out.steps), DType::F16, pool);
  out.compared = confident_steps(greedy["top2_per_step"], 2 * tol);
  expect_prefix_equal(r.ids, greedy["ids"], out.compared, what);
  return out;
}

}  // namespace pagellm::golden
