#include "engine/roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/bench_runner.h"

namespace pagellm {

RooflineResult run_roofline(Engine& engine, Backend& host, int32_t n_vocab,
                            const std::vector<DeviceWeightShare>& shares, const RooflineSpec& spec,
                            const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  RooflineResult r;
  say("memory bandwidth");
  r.bandwidth = host.measure_host_bandwidth(/*read_only=*/false);
  std::vector<double> own_bw(shares.size(), 0.0);
  for (size_t i = 0; i < shares.size(); ++i)
    if (shares[i].backend && !shares[i].backend->uses_host_memory())
      own_bw[i] = shares[i].backend->measure_read_bandwidth();

  uint64_t seed = 100;  // a new seed per run: no prompt repeats an earlier one
  auto bench = [&](int32_t conc, int32_t prompt, int32_t gen) {
    BenchSpec s;
    s.concurrency = conc;
    s.requests = conc;
    s.prompt_len = prompt;
    s.gen_len = gen;
    s.seed = seed++;
    return run_bench(engine, n_vocab, s);
  };

  say("decode, batch 1");
  bench(1, spec.decode_prompt, 4);  // warm-up: first-touch costs, caches
  for (int32_t round = 0; round < std::max(1, spec.decode_rounds); ++round) {
    const BenchResult d = bench(1, spec.decode_prompt, spec.decode_gen);
    if (d.itl_p50_s > 0) r.decode_tokens_per_s = std::max(r.decode_tokens_per_s, 1.0 / d.itl_p50_s);
  }
  say("memory bandwidth again");
  r.read_bytes_per_s_after = host.measure_host_bandwidth(/*read_only=*/true).read_bytes_per_s;
  r.host_read_bytes_per_s = std::max(r.bandwidth.read_bytes_per_s, r.read_bytes_per_s_after);
  double stream_s = 0;  // time to read every weight once, device after device
  for (size_t i = 0; i < shares.size(); ++i) {
    const auto& sh = shares[i];
    const bool own = sh.backend && !sh.backend->uses_host_memory();
    const double bw = own_bw[i] > 0 ? own_bw[i] : r.host_read_bytes_per_s;
    r.devices.push_back({sh.device, sh.bytes, bw, own});
    r.weight_bytes_per_token += sh.bytes;
    if (bw > 0) stream_s += static_cast<double>(sh.bytes) / bw;
  }
  if (stream_s > 0) r.decode_ceiling_tokens_per_s = 1.0 / stream_s;
  r.decode_fraction =
      r.decode_ceiling_tokens_per_s > 0 ? r.decode_tokens_per_s / r.decode_ceiling_tokens_per_s : 0;

  for (int32_t len : spec.prefill_lens) {
    say(fmt::format("prefill, {} tokens", len));
    double best = 0;
    for (int rep = 0; rep < 2; ++rep) {
      const BenchResult p = bench(1, len, 1);
      if (p.ttft_p50_s > 0) best = std::max(best, len / p.ttft_p50_s);
    }
    r.prefill.push_back({len, best});
  }
  for (int32_t c : spec.concurrencies) {
    say(fmt::format("concurrency {}", c));
    const BenchResult b = bench(c, spec.batch_prompt, spec.batch_gen);
    r.batched.push_back({c, b.generated_tokens_per_s, b.itl_p50_s > 0 ? c / b.itl_p50_s : 0.0});
  }
  if (!r.batched.empty()) {
    say("concurrency 1 again");
    const BenchResult b = bench(1, spec.batch_prompt, spec.batch_gen);
    r.batch1_again_decode_tokens_per_s = b.itl_p50_s > 0 ? 1.0 / b.itl_p50_s : 0.0;
    r.batched_base_decode_tokens_per_s = r.batch1_again_decode_tokens_per_s;
    for (const auto& x : r.batched)
      if (x.concurrency == 1)
        r.batched_base_decode_tokens_per_s =
            std::max(r.batched_base_decode_tokens_per_s, x.decode_tokens_per_s);
  }
  return r;
}

double RooflineResult::bandwidth_change() const {
  const double hi = std::max(bandwidth.read_bytes_per_s, read_bytes_per_s_after);
  return hi > 0 ? std::abs(bandwidth.read_bytes_per_s - read_bytes_per_s_after) / hi : 0.0;
}

}  // namespace pagellm
