// End-to-end tests of `pagellm plan`: the table, the JSON keys, refusals with
// exit code 2, and the swap guard on the real machine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "kvcache/disk_tier.h"
#include "util/sizes.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

using nlohmann::json;

using test::CmdResult;

CmdResult run_plan(const std::string& args) {
  return test::run_command(std::string(PAGELLM_BINARY) + " plan " + args);
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(PlanCli, Table) {
  CmdResult r = run_plan("--device cpu:0=64MiB --device cpu:1=32MiB --headroom 0 -c 4096");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "stories260K.gguf (llama, 5 layers, trained context 512")) << r.out;
  EXPECT_TRUE(has(r.out,
                  "device   kind   layers     weights    KV cache   workspace    headroom"
                  "        free  free after"))
      << r.out;
  EXPECT_TRUE(has(r.out, "\ncpu:0    cpu       0-4 ")) << r.out;  // fits on the first device
  EXPECT_TRUE(has(r.out, "\ncpu:1    cpu         -         0 B")) << r.out;
  EXPECT_TRUE(has(r.out, "\nhost     cpu         -  ")) << r.out;
  EXPECT_TRUE(has(r.out, "KV cache: 256 blocks x 16 tokens = 4,096 tokens (f16, 640 B per token)"))
      << r.out;
  EXPECT_TRUE(has(r.out, "max_seq_len 512: 8 concurrent full-length sequences")) << r.out;
  EXPECT_TRUE(has(r.out, "binding limit: kv_tokens")) << r.out;
}

// Without KV flags and without a GPU the cache is for four full-length
// sequences (host RAM is shared with everything else), not max_num_seqs.
TEST(PlanCli, DefaultHostCacheHoldsFourFullSequences) {
  CmdResult r = run_plan("--json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["max_seq_len"], 512);
  EXPECT_EQ(j["max_num_seqs"], 64);
  EXPECT_EQ(j["kv_tokens"], 512 * 4);
  EXPECT_EQ(j["max_concurrent_full_sequences"], 4);
  EXPECT_EQ(j["devices"].back()["kv_bytes"], 512 * 4 * j["kv_bytes_per_token"].get<int64_t>());
  // -c is the cache size, and the context defaults to it (up to the trained 512).
  const json c = json::parse(run_plan("-c 300 --json").out);
  EXPECT_EQ(c["max_seq_len"], 300);
  EXPECT_EQ(c["kv_tokens"], 304);
  const json big = json::parse(run_plan("-c 4096 --json").out);
  EXPECT_EQ(big["max_seq_len"], 512);
  EXPECT_EQ(big["max_concurrent_full_sequences"], 8);
}

TEST(PlanCli, JsonKeysAndExactBytes) {
  CmdResult r = run_plan("--json --device cpu:0=64MiB --headroom 0 -c 1000 --kv-type f32");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  for (const char* key : {"devices", "block_size", "num_blocks", "kv_tokens", "max_seq_len",
                          "max_concurrent_full_sequences", "binding_limit"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["block_size"], 16);
  EXPECT_EQ(j["num_blocks"], 63);  // 1000 tokens, rounded up to blocks
  EXPECT_EQ(j["kv_tokens"], 1008);
  EXPECT_EQ(j["max_seq_len"], 512);
  EXPECT_EQ(j["max_concurrent_full_sequences"], 1);
  EXPECT_EQ(j["binding_limit"], "kv_tokens");
  EXPECT_EQ(j["kv_type"], "f32");
  ASSERT_EQ(j["devices"].size(), 2u);
  const json& d = j["devices"][0];
  EXPECT_EQ(d["name"], "cpu:0");
  EXPECT_EQ(d["kind"], "cpu");
  EXPECT_EQ(d["first_layer"], 0);
  EXPECT_EQ(d["last_layer"], 4);
  EXPECT_EQ(d["kv_bytes"], 1008u * 5 * 256);  // f32: 256 B per token per layer
  EXPECT_EQ(d["headroom_bytes"], 0);
  EXPECT_EQ(d["free_bytes"], 64u << 20);
  EXPECT_EQ(d["free_after_bytes"].get<uint64_t>(), (64u << 20) - d["weight_bytes"].get<uint64_t>() -
                                                       d["kv_bytes"].get<uint64_t>() -
                                                       d["workspace_bytes"].get<uint64_t>());
  const json& h = j["devices"][1];
  EXPECT_EQ(h["name"], "host");
  EXPECT_EQ(h["first_layer"], -1);
  EXPECT_EQ(h["last_layer"], -1);
  EXPECT_EQ(h["weight_bytes"], 4 * 64 * 512);  // the token embedding stays on the host
  for (const char* key : {"weight_bytes", "kv_bytes", "workspace_bytes", "headroom_bytes",
                          "free_bytes", "free_after_bytes"})
    EXPECT_TRUE(h.contains(key)) << key;
  EXPECT_EQ(j["model"]["n_layer"], 5);
}

// --cache-host: the tier's bytes are the host's (its free after counts
// them; the cache on the other device stays), with a line in the table.
// The host's free after in plan JSON `b` counts every device's use, the
// tiers' host RAM included (one run: two runs measure free memory at
// different times).
void expect_host_free_after_counts_all(const json& b) {
  uint64_t used = 0;
  for (const json& d : b["devices"])
    for (const char* k : {"weight_bytes", "kv_bytes", "state_bytes", "workspace_bytes",
                          "host_tier_bytes", "disk_staging_bytes"})
      used += d[k].get<uint64_t>();
  const json& host = b["devices"].back();
  const uint64_t free = host["free_bytes"].get<uint64_t>();
  EXPECT_EQ(host["free_after_bytes"].get<uint64_t>(), free > used ? free - used : 0);
}

TEST(PlanCli, CacheHostIsChargedToTheHost) {
  const std::string flags = "--json --device cpu:0=64MiB --headroom 0 -c 1000";
  CmdResult without = run_plan(flags);
  CmdResult with = run_plan(flags + " --cache-host 3MiB");
  ASSERT_EQ(without.code, 0) << without.err;
  ASSERT_EQ(with.code, 0) << with.err;
  const json a = json::parse(without.out), b = json::parse(with.out);
  EXPECT_EQ(a["host_tier_bytes"], 0);
  EXPECT_EQ(b["host_tier_bytes"], 3u << 20);
  EXPECT_EQ(b["devices"][1]["host_tier_bytes"], 3u << 20);
  EXPECT_EQ(b["devices"][0]["host_tier_bytes"], 0);
  expect_host_free_after_counts_all(b);
  EXPECT_EQ(a["num_blocks"], b["num_blocks"]);
  CmdResult table = run_plan("--device cpu:0=64MiB --headroom 0 -c 1000 --cache-host 3MiB");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("KV host tier: 3.00 MiB of host RAM"), std::string::npos) << table.out;
  CmdResult bad = run_plan("--cache-host much");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err.rfind("error: ", 0), 0u) << bad.err;
}

// --cache-dir: the disk tier reads blocks ahead into host RAM of its own
// (kvcache/block_prefetch.h, at most DiskTierOptions::prefetch_bytes): the
// plan charges that bound to the host like the host tier.
TEST(PlanCli, CacheDirReadAheadIsChargedToTheHost) {
  const std::string flags = "--json --device cpu:0=64MiB --headroom 0 -c 1000";
  CmdResult without = run_plan(flags);
  CmdResult with = run_plan(flags + " --cache-dir /nonexistent/pagellm-cache --cache-host 3MiB");
  ASSERT_EQ(without.code, 0) << without.err;
  ASSERT_EQ(with.code, 0) << with.err;
  const json a = json::parse(without.out), b = json::parse(with.out);
  const uint64_t staging = DiskTierOptions{}.prefetch_bytes;  // what the read-ahead may hold
  ASSERT_GT(staging, 0u);
  EXPECT_EQ(a["disk_staging_bytes"], 0);
  EXPECT_EQ(b["disk_staging_bytes"], staging);
  EXPECT_EQ(b["devices"][1]["disk_staging_bytes"], staging);
  EXPECT_EQ(b["devices"][0]["disk_staging_bytes"], 0);
  EXPECT_EQ(b["host_tier_bytes"], 3u << 20);
  expect_host_free_after_counts_all(b);
  EXPECT_EQ(a["num_blocks"], b["num_blocks"]);
  CmdResult table = run_plan("--device cpu:0=64MiB --headroom 0 -c 1000 --cache-dir /nonexistent");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_TRUE(has(table.out, "KV disk tier: " + format_size(staging) + " of host RAM"))
      << table.out;
}

TEST(PlanCli, CacheHostIsNotChargedWhereTheEngineBuildsNoTier) {
  // Gemma 3's sliding-window layers keep no whole prefix: the engine builds
  // no host tier for it, so the plan holds none and says why.
  const std::string gemma3 = test::data_path("golden/arch/rand-gemma3-tok512-Q8_0.gguf");
  const std::string flags = "-m " + gemma3 + " --json --device cpu:0=64MiB --headroom 0 -c 1000";
  CmdResult without = run_plan(flags);
  CmdResult with = run_plan(flags + " --cache-host 3MiB --cache-dir /nonexistent");
  ASSERT_EQ(without.code, 0) << without.err;
  ASSERT_EQ(with.code, 0) << with.err;
  EXPECT_EQ(json::parse(with.out)["host_tier_bytes"], 0);
  EXPECT_EQ(json::parse(with.out)["disk_staging_bytes"], 0);
  EXPECT_TRUE(has(with.err, "note: --cache-dir is not used")) << with.err;
  EXPECT_EQ(json::parse(without.out)["num_blocks"], json::parse(with.out)["num_blocks"]);
  EXPECT_TRUE(has(with.err, "note: --cache-host is not used: sliding-window layers keep no "
                            "whole prefix"))
      << with.err;
  EXPECT_FALSE(has(without.err, "--cache-host")) << without.err;
}

TEST(PlanCli, ManualDeviceMap) {
  CmdResult r = run_plan(
      "--json --device cpu:0=64MiB --device cpu:1=64MiB --headroom 0 "
      "--device-map 0-1:cpu:1,2-3:cpu:0,4:host");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["device_map"], "0-1:cpu:1,2-3:cpu:0,4:host");
  EXPECT_EQ(j["devices"][1]["name"], "cpu:1");
  EXPECT_EQ(j["devices"][1]["first_layer"], 0);
  EXPECT_EQ(j["devices"][1]["last_layer"], 1);
  EXPECT_EQ(j["devices"][2]["first_layer"], 4);

  r = run_plan("--device cpu:0=64MiB --device-map 0-3:cpu:0");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "does not map layer 4")) << r.err;
}

TEST(PlanCli, RefusalExitsWithCode2) {
  // 1 MiB cannot hold the layers, and --no-cpu-offload keeps them off the host.
  CmdResult r = run_plan("--json --device cpu:0=1MiB --headroom 0 --no-cpu-offload");
  EXPECT_EQ(r.code, 2);
  json j = json::parse(r.out);
  ASSERT_TRUE(j.contains("error"));
  EXPECT_TRUE(has(j["error"], "does not fit without CPU offload (--no-cpu-offload)")) << j["error"];
  EXPECT_EQ(j["largest_kv_tokens"], -1);
  EXPECT_TRUE(has(r.err, "error: ")) << r.err;

  r = run_plan("--device cpu:0=1MiB --headroom 0 --no-cpu-offload");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(has(r.err, "error: ")) << r.err;
}

// A hybrid model (../shared/golden/arch2026's qwen35: layers 0-2 gated
// delta-net, layer 3 attention): the state column, each device's state with
// its layers, and the largest --max-num-seqs whose state fits the device
// exactly (one more is refused, naming the state).
TEST(PlanCli, HybridStateGoesWithItsLayers) {
  const std::string file = test::shared_path("golden/arch2026/rand-qwen35-tok512-F32.gguf");
  if (file.empty()) GTEST_SKIP() << "../shared/golden/arch2026 is absent";
  // README: conv (4 - 1) x (2 x 2 x 32 + 128) floats, delta 4 x 32 x 32, f32.
  const uint64_t per_seq_layer = (3 * (2 * 2 * 32 + 128) + 4 * 32 * 32) * 4;
  const std::string base =
      "-m " + file +
      " --device cpu:0=8MiB --device-map 0-2:cpu:0,3:host --headroom 0 -c 512 --max-batched-tokens 64 ";
  CmdResult r = run_plan(base + "--max-num-seqs 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["recurrent_layers"], 3);
  EXPECT_EQ(j["state_bytes_per_sequence"], 3 * per_seq_layer);
  EXPECT_EQ(j["kv_bytes_per_token"], 2 * 2 * 64 * 2);  // layer 3's f16 K and V
  const json& d = j["devices"][0];
  EXPECT_EQ(d["kv_bytes"], 0);  // recurrent layers only
  // The sequence's slot and the prefix cache's checkpoints (pagellm plan charges them).
  const uint64_t checkpoints = j["state_checkpoints"].get<uint64_t>();
  EXPECT_GE(checkpoints, 1u);
  EXPECT_EQ(j["state_slots"], 1 + checkpoints);
  EXPECT_EQ(d["state_bytes"], (1 + checkpoints) * 3 * per_seq_layer);
  EXPECT_EQ(j["devices"][1]["state_bytes"], 0);
  EXPECT_EQ(j["devices"][1]["kv_bytes"], 512 * 2 * 2 * 64 * 2);
  const uint64_t room = d["free_after_bytes"].get<uint64_t>() + (1 + checkpoints) * 3 * per_seq_layer;
  EXPECT_EQ(d["free_after_bytes"].get<uint64_t>() + d["weight_bytes"].get<uint64_t>() +
                d["workspace_bytes"].get<uint64_t>() + d["state_bytes"].get<uint64_t>(),
            uint64_t{8} << 20);
  const uint64_t most = room / (3 * per_seq_layer) - checkpoints;  // sequences whose state fits cpu:0
  ASSERT_GT(most, 1u);
  r = run_plan(base + "--max-num-seqs " + std::to_string(most));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "(qwen35, 4 layers (3 recurrent),")) << r.out;
  EXPECT_TRUE(has(r.out.substr(0, r.out.find("KV cache:")), "  state ")) << r.out;
  EXPECT_TRUE(has(r.out, "recurrent state: 3 of 4 layers recurrent")) << r.out;
  r = run_plan(base + "--max-num-seqs " + std::to_string(most + 1));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r.err, "recurrent state of 3 layers")) << r.err;
  EXPECT_TRUE(has(r.err, "--max-num-seqs " + std::to_string(most + 1))) << r.err;
}

// Gemma 4 (../shared/golden/arch2026: sliding and full layers of different KV
// shapes, the last shared_kv_layers reading earlier layers' caches): the plan
// charges each layer its own K + V and the sharing layers nothing, fewer bytes
// per token than the same layers with caches of their own; counted here from
// the file's keys. With the sharing layers on the host and their sources on
// cpu:0, the host holds no KV.
TEST(PlanCli, Gemma4CountsSharedKvOnce) {
  const std::string file = test::shared_path("golden/arch2026/rand-gemma4-tok512-Q8_0.gguf");
  if (file.empty()) GTEST_SKIP() << "../shared/golden/arch2026 is absent";
  auto f = GgufFile::open(file);
  const std::string a = "gemma4.attention.";
  const auto& heads = f->find(a + "head_count_kv")->as_array("head_count_kv");
  const auto& sliding = f->find(a + "sliding_window_pattern")->as_array("sliding_window_pattern");
  const uint64_t dim = *f->get_u64(a + "key_length"), swa_dim = *f->get_u64(a + "key_length_swa");
  const uint64_t L = heads.size(), shared = *f->get_u64(a + "shared_kv_layers");
  ASSERT_GT(shared, 0u);
  // f16 K and V per layer; the layers before L - shared keep them.
  uint64_t with = 0, without = 0, full = 0, windowed = 0;
  for (uint64_t l = 0; l < L; ++l) {
    const bool swa = sliding[l].as_bool("sliding_window_pattern");
    const uint64_t bytes = 2 * static_cast<uint64_t>(heads[l].as_i64("head_count_kv")) * (swa ? swa_dim : dim) * 2;
    without += bytes;
    if (l >= L - shared) continue;
    with += bytes;
    (swa ? windowed : full) += bytes;
  }
  CmdResult r = run_plan("-m " + file + " -c 1024 --headroom 0 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["shared_kv_layers"], shared);
  EXPECT_EQ(j["all_layers_kv_bytes_per_token"], with);
  EXPECT_EQ(j["unshared_kv_bytes_per_token"], without);
  EXPECT_LT(j["all_layers_kv_bytes_per_token"].get<uint64_t>(), j["unshared_kv_bytes_per_token"].get<uint64_t>());
  EXPECT_EQ(j["kv_bytes_per_token"], full);  // the full-attention layers
  ASSERT_EQ(j["kv_groups"].size(), 2u);
  const json& g = j["kv_groups"];
  EXPECT_EQ(g[0]["bytes_per_token"], full);
  EXPECT_EQ(g[1]["bytes_per_token"], windowed);
  EXPECT_EQ(g[0]["shared_layers"].get<uint64_t>() + g[1]["shared_layers"].get<uint64_t>(), shared);
  EXPECT_EQ(j["devices"].back()["kv_bytes"], full * j["kv_tokens"].get<uint64_t>() +
                                                 windowed * g[1]["tokens"].get<uint64_t>());
  r = run_plan("-m " + file + " -c 1024 --headroom 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "KV sharing: " + std::to_string(shared) + " of " + std::to_string(L) +
                             " layers read an earlier layer's cache"))
      << r.out;
  // The sharing layers on the host, their sources on cpu:0 (the runner hands
  // them the sources' views in host memory): the host holds no KV.
  r = run_plan("-m " + file + " -c 1024 --headroom 0 --json --device cpu:0=64MiB --device-map 0-" +
               std::to_string(L / 2 - 1) + ":cpu:0," + std::to_string(L / 2) + "-" +
               std::to_string(L - 1) + ":host");
  ASSERT_EQ(r.code, 0) << r.err;
  j = json::parse(r.out);
  ASSERT_EQ(shared, L / 2);  // the file's: the layers with KV are the first half
  EXPECT_EQ(j["devices"][0]["kv_bytes"], full * j["kv_tokens"].get<uint64_t>() +
                                            windowed * j["kv_groups"][1]["tokens"].get<uint64_t>());
  EXPECT_EQ(j["devices"][1]["kv_bytes"], 0);
}

TEST(PlanCli, SwapGuardRefusesWhatExceedsHostRam) {
  // The virtual device's cap would hold 640 GB of cache, but it is carved out
  // of host RAM: the plan is refused (and nothing was allocated to find out).
  CmdResult r = run_plan(
      "--json --device cpu:0=64TiB -c 1000000000 --max-seq-len 1000000000 --max-num-seqs 1");
  EXPECT_EQ(r.code, 2) << r.out;
  json j = json::parse(r.out);
  const std::string msg = j["error"];
  EXPECT_TRUE(has(msg, "a KV cache of 1,000,000,000 tokens")) << msg;
  EXPECT_TRUE(has(msg, "of host RAM (shared by cpu:0, host)")) << msg;
  EXPECT_GT(j["largest_kv_tokens"].get<int64_t>(), 0);
}

TEST(PlanCli, FlagsAndHelp) {
  CmdResult r = run_plan("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* flag :
       {"--device", "--device-map", "--kv-tokens", "--kv-mem", "--kv-fraction", "--headroom",
        "--max-seq-len", "--max-num-seqs", "--min-kv-tokens", "--no-cpu-offload", "--json"})
    EXPECT_TRUE(has(r.out, flag)) << flag;
  r = run_plan("-c 100 --kv-mem 1GiB");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 2);
  r = run_plan("--device cpu:0");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "needs a memory size")) << r.err;
  // A GPU declared twice is split, and each part needs a size.
  r = run_plan("--device cuda:0=40GiB --device cuda:0");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err,
                  "device cuda:0 is declared 2 times: each declaration of a split GPU "
                  "needs a size, e.g. cuda:0=40GiB"))
      << r.err;
  r = run_plan("--device cpu:0=16MiB --device cpu:0=16MiB");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "device cpu:0 is declared twice")) << r.err;
  r = run_plan("--kv-mem 1MiB --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["binding_limit"], "kv_mem");
  r = run_plan("--kv-fraction 0.5 --json --device cpu:0=16MiB");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["kv_mode"], "kv_fraction");
}

}  // namespace
}  // namespace pagellm
