#include "engine/bench_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "util/error.h"

namespace pagellm {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

}  // namespace

BenchResult run_bench(Engine& engine, int32_t n_vocab, const BenchSpec& spec,
                      const std::function<void(int32_t, int32_t)>& progress) {
  if (spec.concurrency < 1 || spec.requests < 1 || spec.prompt_len < 1 || spec.gen_len < 1)
    throw ConfigError("bench: concurrency, requests, prompt and generation lengths must be >= 1");
  if (spec.shared_prefix < 0 || spec.shared_prefix > spec.prompt_len)
    throw ConfigError(
        fmt::format("bench: --shared-prefix {} must be between 0 and the prompt length {}",
                    spec.shared_prefix, spec.prompt_len));
  std::mt19937_64 rng(spec.seed);
  // Ids from the upper part of the vocabulary: ordinary text tokens, no control ids.
  std::uniform_int_distribution<int32_t> tok(std::min(n_vocab - 1, 3 + n_vocab / 8), n_vocab - 1);
  std::vector<int32_t> prefix(static_cast<size_t>(spec.shared_prefix));
  for (auto& t : prefix) t = tok(rng);

  struct Track {
    double submitted = 0, first = 0, last = 0;
    int64_t tokens = 0;
    uint64_t hash = 1469598103934665603ull;  // FNV-1a over the generated ids
  };
  std::vector<Track> tracks(static_cast<size_t>(spec.requests));
  std::vector<double> itls;
  int32_t submitted = 0, finished = 0;
  BenchResult r;
  r.requests = spec.requests;
  r.concurrency = spec.concurrency;
  const auto base = engine.stats();

  auto submit_next = [&] {
    const int32_t i = submitted++;
    Request req;
    req.prompt = prefix;
    while (static_cast<int32_t>(req.prompt.size()) < spec.prompt_len)
      req.prompt.push_back(tok(rng));
    req.max_tokens = spec.gen_len;
    req.ignore_eos = true;
    req.sampling.temperature = 0;
    req.grammar = spec.grammar;
    tracks[static_cast<size_t>(i)].submitted = now_s();
    engine.submit(req, [&, i](const SeqEvent& ev) {
      Track& t = tracks[static_cast<size_t>(i)];
      const double now = now_s();
      if (ev.token >= 0) {
        if (t.tokens == 0)
          t.first = now;
        else
          itls.push_back(now - t.last);
        t.last = now;
        ++t.tokens;
        t.hash = (t.hash ^ static_cast<uint32_t>(ev.token)) * 1099511628211ull;
      }
      if (ev.finished) {
        ++finished;
        if (progress) progress(finished, spec.requests);
      }
    });
  };

  const double t0 = now_s();
  double waste_sum = 0;
  uint64_t waste_n = 0;
  int32_t peak_used = 0;
  while (finished < spec.requests) {
    while (submitted < spec.requests && submitted - finished < spec.concurrency) submit_next();
    if (!engine.step()) break;
    const auto st = engine.stats();
    if (st.slots_allocated > 0) {
      waste_sum += static_cast<double>(st.slots_allocated - st.tokens_stored) /
                   static_cast<double>(st.slots_allocated);
      ++waste_n;
    }
    peak_used = std::max(peak_used, st.blocks.used);
  }
  r.duration_s = now_s() - t0;

  const auto end = engine.stats();
  std::vector<double> ttfts;
  r.output_hash = 1469598103934665603ull;
  for (const auto& t : tracks) {
    r.output_hash = (r.output_hash ^ t.hash) * 1099511628211ull;
    if (t.tokens > 0) ttfts.push_back(t.first - t.submitted);
    r.generated_tokens += static_cast<uint64_t>(t.tokens);
  }
  r.prompt_tokens = static_cast<uint64_t>(spec.requests) * static_cast<uint64_t>(spec.prompt_len);
  r.requests_per_s = r.duration_s > 0 ? spec.requests / r.duration_s : 0;
  r.generated_tokens_per_s =
      r.duration_s > 0 ? static_cast<double>(r.generated_tokens) / r.duration_s : 0;
  r.ttft_p50_s = percentile(ttfts, 0.5);
  r.ttft_p99_s = percentile(ttfts, 0.99);
  r.itl_p50_s = percentile(itls, 0.5);
  r.itl_p99_s = percentile(itls, 0.99);
  r.kv_waste_ratio = waste_n ? waste_sum / static_cast<double>(waste_n) : 0;
  r.kv_peak_usage_ratio = end.blocks.total ? static_cast<double>(peak_used) / end.blocks.total : 0;
  const uint64_t q = end.blocks.prefix_queries - base.blocks.prefix_queries;
  r.prefix_hit_rate =
      q ? static_cast<double>(end.blocks.prefix_hits - base.blocks.prefix_hits) / q : 0;
  r.preemptions = end.preemptions - base.preemptions;
  r.steps = end.steps - base.steps;
  return r;
}

}  // namespace pagellm
