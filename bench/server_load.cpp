// Load generator for `pagellm serve`: closed-loop streaming /v1/completions
// clients at one or more concurrencies, reporting throughput and latency
// percentiles (TTFT, inter-token, end to end).
//
//   bench_server_load --port PORT [--concurrency 1,2,4,...] [--requests N]
//                     [--max-seconds S] [--prompt-len P] [--gen-len G] [--vocab V] [--json]
//
// Loopback only (127.0.0.1), bounded: each level stops after --requests
// requests (default 4 x concurrency, at least 8) or --max-seconds (default
// 60), whichever comes first. Prompts are random token ids (exact lengths,
// no shared prefix); every request generates exactly G tokens (ignore_eos).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int port = 0;
  std::vector<int> concurrency = {1, 2, 4, 8, 16, 32, 64};
  int requests = 0;  // per level; 0: 4 x concurrency, at least 8
  double max_seconds = 60.0;
  int prompt_len = 64;
  int gen_len = 64;
  int vocab = 512;
  bool json = false;
};

struct Sample {
  bool ok = false;
  double ttft = 0, e2e = 0;
  int tokens = 0;
  std::vector<double> gaps;  // between consecutive content chunks
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

Sample one_request(httplib::Client& cli, const Options& o, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> id(3, o.vocab - 1);
  std::vector<int> prompt(static_cast<size_t>(o.prompt_len));
  prompt[0] = 1;
  for (size_t i = 1; i < prompt.size(); ++i) prompt[i] = id(rng);
  nlohmann::json body = {{"prompt", prompt},
                         {"max_tokens", o.gen_len},
                         {"temperature", 0.8},
                         {"seed", seed},
                         {"ignore_eos", true},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  Sample s;
  const auto start = Clock::now();
  Clock::time_point last{};
  std::string buf;
  bool first = true;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = body.dump();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    size_t pos;
    while ((pos = buf.find("\n\n")) != std::string::npos) {
      std::string ev = buf.substr(0, pos);
      buf.erase(0, pos + 2);
      if (ev.rfind("data: ", 0) != 0 || ev == "data: [DONE]") continue;
      auto j = nlohmann::json::parse(ev.substr(6), nullptr, false);
      if (j.is_discarded() || j.contains("error")) return false;
      if (j.contains("usage") && j["usage"].is_object())
        s.tokens = j["usage"]["completion_tokens"].get<int>();
      if (!j.contains("choices") || j["choices"].empty()) continue;
      if (j["choices"][0]["text"].get<std::string>().empty()) continue;
      const auto now = Clock::now();
      if (first) {
        s.ttft = std::chrono::duration<double>(now - start).count();
        first = false;
      } else {
        s.gaps.push_back(std::chrono::duration<double>(now - last).count());
      }
      last = now;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  s.e2e = std::chrono::duration<double>(Clock::now() - start).count();
  s.ok = sent && res.status == 200 && s.tokens > 0;
  return s;
}

nlohmann::json run_level(const Options& o, int concurrency) {
  const int total = o.requests > 0 ? o.requests : std::max(8, 4 * concurrency);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(o.max_seconds));
  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<Sample> samples;
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&, w] {
      httplib::Client cli("127.0.0.1", o.port);
      cli.set_read_timeout(120, 0);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);
      for (;;) {
        const int i = next++;
        if (i >= total || Clock::now() >= deadline) return;
        Sample s = one_request(cli, o, 1000003ull * static_cast<uint64_t>(i + 1) + w);
        std::lock_guard<std::mutex> lock(mu);
        samples.push_back(std::move(s));
      }
    });
  }
  for (auto& t : workers) t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> ttft, e2e, gaps, tpot;
  int ok = 0;
  long tokens = 0;
  for (const auto& s : samples) {
    if (!s.ok) continue;
    ++ok;
    tokens += s.tokens;
    ttft.push_back(s.ttft);
    e2e.push_back(s.e2e);
    gaps.insert(gaps.end(), s.gaps.begin(), s.gaps.end());
    if (s.tokens > 1) tpot.push_back((s.e2e - s.ttft) / (s.tokens - 1));
  }
  return {{"concurrency", concurrency},
          {"requests", static_cast<int>(samples.size())},
          {"ok", ok},
          {"errors", static_cast<int>(samples.size()) - ok},
          {"duration_s", duration},
          {"requests_per_s", ok / duration},
          {"output_tokens_per_s", tokens / duration},
          {"ttft_p50_ms", percentile(ttft, 0.5) * 1e3},
          {"ttft_p90_ms", percentile(ttft, 0.9) * 1e3},
          {"ttft_p99_ms", percentile(ttft, 0.99) * 1e3},
          {"itl_p50_ms", percentile(gaps, 0.5) * 1e3},
          {"itl_p99_ms", percentile(gaps, 0.99) * 1e3},
          {"tpot_p50_ms", percentile(tpot, 0.5) * 1e3},
          {"e2e_p50_ms", percentile(e2e, 0.5) * 1e3},
          {"e2e_p99_ms", percentile(e2e, 0.99) * 1e3}};
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--port")
      o.port = std::stoi(val());
    else if (a == "--requests")
      o.requests = std::stoi(val());
    else if (a == "--max-seconds")
      o.max_seconds = std::stod(val());
    else if (a == "--prompt-len")
      o.prompt_len = std::stoi(val());
    else if (a == "--gen-len")
      o.gen_len = std::stoi(val());
    else if (a == "--vocab")
      o.vocab = std::stoi(val());
    else if (a == "--json")
      o.json = true;
    else if (a == "--concurrency") {
      o.concurrency.clear();
      std::stringstream ss(val());
      for (std::string c; std::getline(ss, c, ',');) o.concurrency.push_back(std::stoi(c));
    } else {
      return false;
    }
  }
  return o.port > 0 && o.prompt_len > 0 && o.gen_len > 0 && o.vocab > 3 && o.max_seconds > 0 &&
         !o.concurrency.empty() &&
         std::all_of(o.concurrency.begin(), o.concurrency.end(),
                     [](int c) { return c > 0 && c <= 256; });
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    if (!parse(argc, argv, o)) {
      std::fprintf(stderr,
                   "usage: %s --port PORT [--concurrency 1,2,4,...] [--requests N] "
                   "[--max-seconds S] [--prompt-len P] [--gen-len G] [--vocab V] [--json]\n",
                   argv[0]);
      return 2;
    }
  } catch (const std::exception&) {
    std::fprintf(stderr, "bad number in the arguments\n");
    return 2;
  }
  if (!o.json)
    std::printf("%5s %6s %6s %9s %10s %9s %9s %9s %8s %8s %9s %9s\n", "conc", "reqs", "errors",
                "req/s", "out tok/s", "TTFT p50", "TTFT p90", "TTFT p99", "ITL p50", "ITL p99",
                "E2E p50", "E2E p99");
  for (int c : o.concurrency) {
    const nlohmann::json r = run_level(o, c);
    if (o.json) {
      std::printf("%s\n", r.dump().c_str());
    } else {
      std::printf("%5d %6d %6d %9.2f %10.1f %9.1f %9.1f %9.1f %8.2f %8.2f %9.1f %9.1f\n", c,
                  r["requests"].get<int>(), r["errors"].get<int>(),
                  r["requests_per_s"].get<double>(), r["output_tokens_per_s"].get<double>(),
                  r["ttft_p50_ms"].get<double>(), r["ttft_p90_ms"].get<double>(),
                  r["ttft_p99_ms"].get<double>(), r["itl_p50_ms"].get<double>(),
                  r["itl_p99_ms"].get<double>(), r["e2e_p50_ms"].get<double>(),
                  r["e2e_p99_ms"].get<double>());
    }
    std::fflush(stdout);
  }
  return 0;
}
