// The plan's host prediction against the resident memory actually used: a
// run of the engine on a ~100 MB model stays within 5% (or 32 MiB) of it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace pagellm {
namespace {

std::string run_stdout(const std::string& args) {
  const test::CmdResult r = test::run_command(std::string(PAGELLM_BINARY) + " " + args);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.out;
}

TEST(PlanVsRss, HostPredictionMatchesResidentMemory) {
  if (test::kSanitized) GTEST_SKIP() << "RSS includes the sanitizer's shadow memory";
  test::TempPath model(".gguf");
  run_stdout(
      "make-model --n-embd 1024 --n-layer 8 --n-head 16 --n-head-kv 4 --n-ff 2816 "
      "--type q8_0 --vocab-from '" +
      test::data_path("stories260K.gguf") + "' -o '" + model.path + "'");
  for (const std::string flags :
       {"-c 256 --max-num-seqs 1 --max-seq-len 256",
        "-c 4096 --max-num-seqs 16 --max-seq-len 256 --max-batched-tokens 512"}) {
    auto plan =
        nlohmann::json::parse(run_stdout("plan -m '" + model.path + "' " + flags + " --json"));
    double predicted = 0;
    for (const auto& d : plan["devices"])
      predicted += d["weight_bytes"].get<double>() + d["kv_bytes"].get<double>() +
                   d["workspace_bytes"].get<double>();
    auto run = nlohmann::json::parse(
        run_stdout("bench -m '" + model.path + "' " + flags +
                   " --concurrency 1 --requests 1 --prompt-len 16 --gen-len 4 --json"));
    const double rss = run["peak_rss_bytes"].get<double>();
    const double diff = std::abs(rss - predicted);
    std::printf("plan [%s]: host prediction %.1f MiB, peak RSS %.1f MiB (%+.1f%%)\n", flags.c_str(),
                predicted / 1048576, rss / 1048576, 100 * (rss - predicted) / predicted);
    EXPECT_LE(diff, std::max(0.05 * predicted, 32.0 * 1048576)) << flags;
  }
}

}  // namespace
}  // namespace pagellm
