// End-to-end tests of the `pagellm` executable: make-model, inspect, generate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "device/memory_probe.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

using nlohmann::json;

using test::CmdResult;

CmdResult run(const std::string& args) {
  return test::run_command(std::string(PAGELLM_BINARY) + " " + args);
}

std::string q(const std::string& s) {
  return "'" + s + "'";
}

TEST(Cli, MakeModelInspectGenerate) {
  test::TempPath model(".gguf");
  CmdResult mk =
      run("make-model --arch llama --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 "
          "--n-ctx 256 --type q8_0 --seed 7 --vocab-from " +
          q(test::data_path("stories260K.gguf")) + " -o " + q(model.path));
  ASSERT_EQ(mk.code, 0) << mk.err;

  CmdResult ins = run("inspect --json " + q(model.path));
  ASSERT_EQ(ins.code, 0) << ins.err;
  json j = json::parse(ins.out);
  EXPECT_EQ(j["metadata"]["general.architecture"], "llama");
  EXPECT_EQ(j["metadata"]["llama.embedding_length"], 64);
  EXPECT_EQ(j["metadata"]["llama.block_count"], 2);
  EXPECT_EQ(j["metadata"]["llama.attention.head_count"], 4);
  EXPECT_EQ(j["metadata"]["llama.attention.head_count_kv"], 2);
  EXPECT_EQ(j["metadata"]["llama.feed_forward_length"], 128);
  EXPECT_EQ(j["metadata"]["llama.context_length"], 256);
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.model"], "llama");
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"]["count"], 512);  // abbreviated array
  ASSERT_EQ(j["tensors"].size(), 3u + 2 * 9);
  int n_q8 = 0;
  for (const auto& t : j["tensors"]) {
    if (t["name"] == "blk.1.ffn_down.weight") {
      EXPECT_EQ(t["shape"], json({128, 64}));
    }
    if (t["name"] == "blk.0.attn_k.weight") {
      EXPECT_EQ(t["shape"], json({64, 32}));
    }
    if (t["type"] == "q8_0") ++n_q8;
  }
  EXPECT_EQ(n_q8, 2 + 2 * 7);

  CmdResult text = run("inspect " + q(model.path));
  ASSERT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("blk.1.ffn_up.weight"), std::string::npos);
  EXPECT_NE(text.out.find("[512 x str: "), std::string::npos);

  CmdResult gen = run("generate -m " + q(model.path) +
                      " -p 'Once upon a time' -n 12 --temp 0 --ignore-eos --json -t 2");
  ASSERT_EQ(gen.code, 0) << gen.err;
  json g = json::parse(gen.out);
  EXPECT_EQ(g["output_tokens"], 12);
  EXPECT_EQ(g["output_ids"].size(), 12u);
  EXPECT_EQ(g["prompt_ids"], json({1, 403, 407, 261, 378}));
  for (const char* key :
       {"text", "prompt_tokens", "prefill_tokens_per_s", "decode_tokens_per_s", "peak_rss_bytes"})
    EXPECT_TRUE(g.contains(key)) << key;
}

// make-model writes every registered family as the loader reads it; the
// sliding-window families' plans show their KV groups.
TEST(Cli, MakeModelEveryFamilyLoadsAndPlansItsKvGroups) {
  for (const char* arch :
       {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "olmo2", "smollm3"}) {
    test::TempPath model(".gguf");
    CmdResult mk = run(std::string("make-model --arch ") + arch +
                       " --n-embd 64 --n-layer 6 --n-head 4 --n-head-kv 2 --n-ff 128 --head-dim 32 "
                       "--sliding-window 16 --type q8_0 --vocab-from " +
                       q(test::data_path("stories260K.gguf")) + " -o " + q(model.path));
    ASSERT_EQ(mk.code, 0) << arch << ": " << mk.err;
    CmdResult gen = run("generate -m " + q(model.path) +
                        " -p 'Once upon a time' -n 40 --temp 0 --ignore-eos --json -c 256");
    ASSERT_EQ(gen.code, 0) << arch << ": " << gen.err;
    EXPECT_EQ(json::parse(gen.out)["output_tokens"], 40) << arch;
    CmdResult plan = run("plan -m " + q(model.path) + " -c 4096 --max-num-seqs 1 --max-seq-len 4096 --json");
    ASSERT_EQ(plan.code, 0) << arch << ": " << plan.err;
    const json groups = json::parse(plan.out)["kv_groups"];
    const bool windowed = std::string(arch) == "gemma2" || std::string(arch) == "gemma3";
    ASSERT_EQ(groups.size(), windowed ? 2u : 1u) << arch << ": " << groups.dump();
    EXPECT_EQ(groups[0]["tokens"], 4096) << arch;
    if (windowed) {
      EXPECT_EQ(groups[1]["window"], 16) << arch;
      EXPECT_EQ(groups[1]["layers"], std::string(arch) == "gemma2" ? 3 : 5) << arch;
      EXPECT_LT(groups[1]["tokens"].get<int64_t>(), 4096) << arch;
    }
  }
  CmdResult bad = run("make-model --arch mamba --n-embd 64 --n-layer 1 --n-head 4 --n-head-kv 4 "
                      "--n-ff 64 --vocab-from x -o /tmp/x.gguf");
  EXPECT_NE(bad.code, 0);
}

// Mixture of experts end to end: make-model writes Mixtral (llama with
// experts) and qwen3moe; on a virtual device with room for the attention and
// KV only, every layer runs there with its experts on the host, and the
// tokens equal the all-host run's.
TEST(Cli, MoeExpertsOnTheHostGiveTheSameTokens) {
  for (const char* arch : {"mixtral", "qwen3moe"}) {
    test::TempPath model(".gguf");
    CmdResult mk = run(std::string("make-model --arch ") + arch +
                       " --n-embd 64 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 128 --n-ff-exp 256 "
                       "--type q8_0 --vocab-from " +
                       q(test::data_path("stories260K.gguf")) + " -o " + q(model.path));
    ASSERT_EQ(mk.code, 0) << arch << ": " << mk.err;
    const json meta = json::parse(run("inspect --json " + q(model.path)).out)["metadata"];
    const std::string family = std::string(arch) == "mixtral" ? "llama" : arch;
    EXPECT_EQ(meta["general.architecture"], family);
    EXPECT_EQ(meta[family + ".expert_count"], 8) << arch;
    EXPECT_EQ(meta[family + ".expert_used_count"], 2) << arch;
    const std::string flags = " -c 256 --max-batched-tokens 64 --max-num-seqs 2";
    CmdResult plan = run("plan -m " + q(model.path) + " --device cpu:0=2MiB --json" + flags);
    ASSERT_EQ(plan.code, 0) << arch << ": " << plan.err;
    const json p = json::parse(plan.out);
    EXPECT_EQ(p["host_layers"], 0) << arch;
    EXPECT_EQ(p["experts_on_host"], json({0, 1, 2, 3})) << arch;
    EXPECT_EQ(p["devices"][0]["expert_bytes"], 0) << arch;
    EXPECT_GT(p["devices"][1]["expert_bytes"].get<uint64_t>(), 0u) << arch;
    EXPECT_EQ(p["device_map"], "0-3:cpu:0,experts:0-3:host") << arch;
    const std::string gen = " -p 'Once upon a time' -n 16 --temp 0 --ignore-eos --json -t 2";
    CmdResult on_host = run("generate -m " + q(model.path) + gen + flags);
    CmdResult split = run("generate -m " + q(model.path) + " --device cpu:0=2MiB" + gen + flags);
    ASSERT_EQ(on_host.code, 0) << on_host.err;
    ASSERT_EQ(split.code, 0) << split.err;
    EXPECT_EQ(json::parse(split.out)["output_ids"], json::parse(on_host.out)["output_ids"]) << arch;
    // Pinned by hand: the same.
    CmdResult pinned = run("generate -m " + q(model.path) +
                           " --device cpu:0=8MiB --device-map '0-3:cpu:0,experts:1-2:host'" + gen +
                           flags);
    ASSERT_EQ(pinned.code, 0) << pinned.err;
    EXPECT_EQ(json::parse(pinned.out)["output_ids"], json::parse(on_host.out)["output_ids"]) << arch;
  }
  CmdResult bad = run("plan --device-map '0-4:host,experts:0-1:host'");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("the model has no experts"), std::string::npos) << bad.err;
}

// A grammar state that no token can continue (a WordPiece vocabulary has no
// token with a control byte) ends the request with an error naming it, at
// once, not a hang: exit 1, "error" in the JSON.
TEST(Cli, GrammarDeadEndIsAnErrorNotAHang) {
  test::TempPath model(".gguf"), gbnf(".gbnf");
  CmdResult mk = run("make-model --arch llama --n-embd 32 --n-layer 1 --n-head 2 --n-head-kv 2 "
                     "--n-ff 64 --n-ctx 64 --type f32 --vocab-from " +
                     q(test::data_path("tokenizer-vectors/ggml-vocab-bert-bge.gguf")) + " -o " +
                     q(model.path));
  ASSERT_EQ(mk.code, 0) << mk.err;
  std::ofstream(gbnf.path) << "root ::= \"\\x01\\x02\"\n";
  CmdResult r = test::run_command("timeout 60 " + std::string(PAGELLM_BINARY) + " generate -m " +
                                  q(model.path) + " -p hi -n 8 --json --grammar " + q(gbnf.path));
  EXPECT_EQ(r.code, 1) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["stop_reason"], "error");
  EXPECT_NE(j["error"].get<std::string>().find("the grammar allows no token"), std::string::npos)
      << j.dump();
}

// --grammar and --json-schema constrain generate's output; bad files fail
// before the model loads, with the position or the keyword.
TEST(Cli, GrammarAndJsonSchemaFlags) {
  test::TempPath gbnf(".gbnf"), schema(".json"), bad(".gbnf"), bad_schema(".json");
  {
    std::ofstream(gbnf.path) << "root ::= \"[\" [0-9]{1,3} (\",\" [0-9]{1,3}){0,2} \"]\"\n";
    std::ofstream(schema.path)
        << R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9}},)"
           R"("required":["n"],"additionalProperties":false})";
    std::ofstream(bad.path) << "root ::= \"[\" missing";
    std::ofstream(bad_schema.path) << R"({"type":"object","if":{}})";
  }
  CmdResult g = run("generate -p 'Once upon a time' -n 20 --temp 1 --seed 3 --json --grammar " +
                    q(gbnf.path));
  ASSERT_EQ(g.code, 0) << g.err;
  const json gj = json::parse(g.out);
  if (gj["stop_reason"] == "eos") {
    const std::string text = gj["text"];
    EXPECT_EQ(text.front(), '[');
    EXPECT_EQ(text.back(), ']');
  }
  CmdResult js = run("generate -p 'Once upon a time' -n 20 --temp 1 --seed 4 --json --json-schema " +
                     q(schema.path));
  ASSERT_EQ(js.code, 0) << js.err;
  const json jj = json::parse(js.out);
  if (jj["stop_reason"] == "eos") {
    const json v = json::parse(jj["text"].get<std::string>());
    EXPECT_GE(v["n"].get<int>(), 1);
    EXPECT_LE(v["n"].get<int>(), 9);
  }
  CmdResult e1 = run("generate -p hi --grammar " + q(bad.path));
  EXPECT_EQ(e1.code, 1);
  EXPECT_NE(e1.err.find("undefined rule 'missing'"), std::string::npos) << e1.err;
  CmdResult e2 = run("generate -p hi --json-schema " + q(bad_schema.path));
  EXPECT_EQ(e2.code, 1);
  EXPECT_NE(e2.err.find("'if'"), std::string::npos) << e2.err;
  CmdResult e3 = run("generate -p hi --grammar " + q(gbnf.path) + " --json-schema " + q(schema.path));
  EXPECT_NE(e3.code, 0);
}

TEST(Cli, GenerateMatchesGoldenGreedyOnShippedModel) {
  std::ifstream in(test::data_path("golden/stories260K.json"));
  json golden = json::parse(in);
  for (const auto& c : golden["cases"]) {
    if (c["name"] != "once_upon" && c["name"] != "quote_unicode") continue;
    const auto& ref = c["kv_f32"];
    CmdResult gen = run("generate -p " + q(c["prompt"].get<std::string>()) + " -n " +
                        std::to_string(ref["greedy_ids"].size()) +
                        " --temp 0 --ignore-eos --kv-type f32 --json");
    ASSERT_EQ(gen.code, 0) << gen.err;
    json g = json::parse(gen.out);
    EXPECT_EQ(g["prompt_ids"], c["prompt_ids"]);
    EXPECT_EQ(g["output_ids"], ref["greedy_ids"]);
    EXPECT_EQ(g["text"], ref["greedy_text"]);
  }
}

// --logits: the last prompt position's logits against llama.cpp's (F32 KV
// cache), on families beyond llama (the references' README tolerances).
TEST(Cli, GenerateLogitsMatchTheReferenceOnEveryFamily) {
  for (const char* file : {"rand-qwen3-tok512-Q8_0", "rand-gemma2-tok512-Q8_0",
                           "rand-phi3-tok512-Q8_0", "rand-olmo2-tok512-Q8_0"}) {
    const std::string base = std::string("golden/arch/") + file;
    std::ifstream in(test::data_path(base + ".json"));
    const json ref = json::parse(in)["cases"][1];
    CmdResult gen = run("generate -m " + q(test::data_path(base + ".gguf")) + " -p " +
                        q(ref["prompt"].get<std::string>()) +
                        " -n 1 --temp 0 --kv-type f32 --json --logits -c 512");
    ASSERT_EQ(gen.code, 0) << file << ": " << gen.err;
    const json g = json::parse(gen.out);
    EXPECT_EQ(g["prompt_ids"], ref["prompt_ids"]) << file;
    const auto got = g["last_prompt_logits"].get<std::vector<double>>();
    const auto want = ref["kv_f32"]["last_logits"].get<std::vector<double>>();
    ASSERT_EQ(got.size(), want.size()) << file;
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::abs(got[i] - want[i]));
    EXPECT_LT(err, 3e-2) << file;
  }
  CmdResult bad = run("generate -p hi --logits");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--logits needs --json"), std::string::npos) << bad.err;
}

TEST(Cli, PerplexityJsonAndErrors) {
  const std::string text = q(test::data_path("stories260K.README.md"));
  CmdResult r = run("perplexity -f " + text + " -c 64 --kv-type f32 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  EXPECT_GT(j["ppl_stderr"].get<double>(), 0.0);
  EXPECT_NEAR(std::log(j["ppl"].get<double>()), j["mean_nll"].get<double>(), 1e-9);
  EXPECT_EQ(j["tokens"].get<int64_t>(), j["windows"].get<int64_t>() * (64 - 1 - 32));
  CmdResult missing = run("perplexity -f /nonexistent/text.txt");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("error: cannot read /nonexistent/text.txt"), std::string::npos)
      << missing.err;
  CmdResult shortish = run("perplexity -f " + text + " -c 100000");
  EXPECT_EQ(shortish.code, 1);
  EXPECT_NE(shortish.err.find("perplexity needs at least 2 x the context"), std::string::npos)
      << shortish.err;
}

// Every usage error is one line starting "error:", naming the flag, with exit 1.
TEST(Cli, UsageErrorsAreOneLineWithExitOne) {
  struct Case {
    const char* args;
    const char* says;
  };
  for (const Case& c : {Case{"generate -n -1", "error: --n-predict: must be a number >= 0, got '-1'"},
                        Case{"generate --temp abc", "error: --temp: must be a number >= 0"},
                        Case{"generate --repeat-penalty -1", "error: --repeat-penalty: must be a number > 0"},
                        Case{"serve -t -1", "error: --threads: must be a number >= 0"},
                        Case{"generate --bogus", "error: The following argument was not expected: --bogus"},
                        Case{"generate -hf org/model", "error: -hf: pagellm does not download models"},
                        Case{"plan -ctk q8_0 -ctv f16", "error: -ctk and -ctv must name the same type"},
                        Case{"plan --top-p 2", "error: The following arguments were not expected: --top-p 2"},
                        Case{"generate --top-p 2", "error: --top-p: must be a number from 0 to 1"},
                        Case{"plan --block-size 12", "error: --block-size: must be 8, 16 or 32"},
                        Case{"inspect", "error: a GGUF file (inspect FILE or -m FILE) is required"},
                        Case{"chat --json", "error: --json needs scripted turns"},
                        Case{"", "error:"}}) {
    CmdResult r = run(c.args);
    EXPECT_EQ(r.code, 1) << c.args << ": " << r.err;
    EXPECT_EQ(r.err.rfind(c.says, 0), 0u) << c.args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
}

TEST(Cli, VersionAliasesAndPromptFile) {
  CmdResult v = run("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("pagellm ", 0), 0u) << v.out;
  EXPECT_NE(v.out.find("commit "), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("CPU kernels "), std::string::npos) << v.out;
  // llama.cpp's spellings: -np, -ctk / -ctv.
  CmdResult p = run("plan -np 3 -ctk f32 -ctv f32 --json");
  ASSERT_EQ(p.code, 0) << p.err;
  const json j = json::parse(p.out);
  EXPECT_EQ(j["max_num_seqs"], 3);
  EXPECT_EQ(j["kv_type"], "f32");
  // -sys is chat's --system; scripted turns are numbered.
  CmdResult c = run("chat -sys 'You are terse.' --message hi --message again -n 2 --json");
  ASSERT_EQ(c.code, 0) << c.err;
  const json turns = json::parse(c.out)["turns"];
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_NE(turns[0]["prompt"].get<std::string>().find("You are terse."), std::string::npos);
  EXPECT_EQ(turns[0]["turn"], 1);
  EXPECT_EQ(turns[1]["turn"], 2);
  // -f: the prompt from a file gives the tokens of the same text with -p.
  test::TempPath prompt(".txt");
  test::write_file(prompt.path, "Once upon a time");
  CmdResult a = run("generate -f " + q(prompt.path) + " -n 4 --temp 0 --json");
  CmdResult b = run("generate -p 'Once upon a time' -n 4 --temp 0 --json");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(json::parse(a.out)["output_ids"], json::parse(b.out)["output_ids"]);
  EXPECT_EQ(json::parse(a.out)["prompt_ids"], json::parse(b.out)["prompt_ids"]);
}

TEST(Cli, InspectTakesMAndHelpShowsDefaults) {
  CmdResult a = run("inspect -m " + q(test::data_path("stories260K.gguf")) + " --json");
  CmdResult b = run("inspect " + q(test::data_path("stories260K.gguf")) + " --json");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  CmdResult gen = run("generate --help");
  EXPECT_NE(gen.out.find("=128"), std::string::npos) << gen.out;  // -n's default
  EXPECT_NE(gen.out.find("8, 16 or 32"), std::string::npos) << gen.out;
  CmdResult mk = run("make-model --help");
  EXPECT_NE(mk.out.find("=q4_0"), std::string::npos) << mk.out;
  EXPECT_NE(mk.out.find("=llama"), std::string::npos) << mk.out;
  // generate says its plan in one line.
  CmdResult g = run("generate -p hi -n 2");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.err.rfind("plan: layers 0-4:host, KV cache 512 tokens (f16, 320.00 KiB)", 0), 0u)
      << g.err;
}

TEST(Cli, StreamsTextAndSummary) {
  CmdResult gen = run("generate -p 'Once upon a time' -n 16 --temp 0 --seed 1");
  ASSERT_EQ(gen.code, 0) << gen.err;
  EXPECT_EQ(gen.out.rfind("Once upon a time", 0), 0u);
  EXPECT_NE(gen.err.find("prefill"), std::string::npos);
  EXPECT_NE(gen.err.find("decode"), std::string::npos);
}

TEST(Cli, SeededSamplingIsReproducible) {
  const std::string args =
      "generate -p 'Lily wanted' -n 24 --temp 1.0 --top-k 0 --top-p 1 "
      "--min-p 0 --ignore-eos --json --seed ";
  CmdResult a = run(args + "42"), b = run(args + "42"), c = run(args + "43");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(json::parse(a.out)["output_ids"], json::parse(b.out)["output_ids"]);
  EXPECT_NE(json::parse(a.out)["output_ids"], json::parse(c.out)["output_ids"]);
}

TEST(Cli, BadInputGivesClearErrors) {
  test::TempPath trunc(".gguf");
  std::string bytes = test::read_file(test::data_path("stories260K.gguf"));
  test::write_file(trunc.path, bytes.substr(0, bytes.size() / 2));
  CmdResult r = run("generate -m " + q(trunc.path) + " -p hi");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: "), std::string::npos);
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;

  r = run("generate -m /nonexistent.gguf -p hi");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot open '/nonexistent.gguf'"), std::string::npos) << r.err;

  r = run("generate -p 'Once upon a time there was a dog' -c 4");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("does not fit the context of 4 tokens"), std::string::npos) << r.err;

  r = run("generate -p hi --kv-type q9");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("unknown tensor type 'q9'"), std::string::npos) << r.err;

  // A GPU that is not there (or a build without CUDA): a clear error, no run
  // on the host instead.
  if (SystemProbe().cuda_device_count() == 0) {
    r = run("generate -p hi -n 1 --device cuda:0");
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(r.err.find("device cuda:0 is not there") != std::string::npos ||
                r.err.find("device cuda:0: this pagellm was built without CUDA") !=
                    std::string::npos)
        << r.err;
  }

  r = run("inspect " + q(test::data_path("stories260K.README.md")));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("not a GGUF file"), std::string::npos) << r.err;

  r =
      run("make-model --n-embd 60 --n-layer 1 --n-head 6 --n-head-kv 2 --n-ff 64 --type q4_0 "
          "--vocab-from " +
          q(test::data_path("stories260K.gguf")) + " -o /tmp/never.gguf");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("not a multiple of the q4_0 block size 32"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pagellm
