// `pagellm plan` on a sliding-window model (issue 54 item 5): the per-token
// line names the full-attention layers, each KV group gets its tokens and
// bytes, the groups' sum is the table's KV cache column, and the window's
// saving is stated, whatever --max-num-seqs is.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "support/test_support.h"
#include "util/sizes.h"

namespace pagellm {
namespace {

using nlohmann::json;

TEST(PlanCliWindows, GroupsAddUpToTheTableAndShowTheSaving) {
  const std::string model = test::data_path("golden/arch/rand-gemma3-tok512-Q8_0.gguf");
  for (const char* seqs : {"1", "2"}) {
    SCOPED_TRACE(seqs);
    const std::string args = " plan -m '" + model +
                             "' -c 4096 --max-seq-len 512 --max-batched-tokens 64 --max-num-seqs " +
                             seqs;
    const test::CmdResult text = test::run_command(std::string(PAGELLM_BINARY) + args);
    const test::CmdResult js = test::run_command(std::string(PAGELLM_BINARY) + args + " --json");
    ASSERT_EQ(text.code, 0) << text.err;
    ASSERT_EQ(js.code, 0) << js.err;
    const json j = json::parse(js.out);
    uint64_t kv = 0;
    for (const auto& d : j["devices"]) kv += d["kv_bytes"].get<uint64_t>();
    EXPECT_NE(text.out.find("per token in the full-attention layers"), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("(the KV cache column is their sum, " + format_size(kv) + ")"),
              std::string::npos)
        << text.out;
    // Each group: tokens x per-token bytes = its bytes; the bytes add up to the table's.
    // Independent per-layer size: one layer's K + V rows per token, from the JSON.
    const auto& groups = j["kv_groups"];
    ASSERT_EQ(groups.size(), 2u);
    const uint64_t per_layer =
        j["kv_bytes_per_token"].get<uint64_t>() / groups[0]["layers"].get<uint64_t>();
    uint64_t sum = 0;
    for (const auto& g : groups) {
      const uint64_t bytes = per_layer * g["layers"].get<uint64_t>() * g["tokens"].get<uint64_t>();
      sum += bytes;
      EXPECT_NE(text.out.find(format_count(g["tokens"].get<int64_t>()) + " tokens x " +
                              format_size(per_layer * g["layers"].get<uint64_t>()) + " = " +
                              format_size(bytes)),
                std::string::npos)
          << text.out;
    }
    EXPECT_EQ(sum, kv);
    const uint64_t full_tokens = groups[0]["tokens"].get<uint64_t>();
    const uint64_t window_layers = groups[1]["layers"].get<uint64_t>();
    const uint64_t saved =
        per_layer * window_layers * (full_tokens - groups[1]["tokens"].get<uint64_t>());
    EXPECT_NE(text.out.find("the window saves " + format_size(saved)), std::string::npos)
        << text.out;
    EXPECT_GT(saved, 0u);
  }
}

}  // namespace
}  // namespace pagellm
