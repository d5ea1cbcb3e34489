// llama.cpp command lines: flags that mean the same here are aliases, flags
// with no meaning print exactly one `note:` line and the command goes on
// (cli/llama_compat.h); sampler defaults in --help; -ngl 0.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/sampling_defaults.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

using nlohmann::json;
using test::CmdResult;

CmdResult run(const std::string& args) {
  return test::run_command(std::string(PAGELLM_BINARY) + " " + args);
}

std::string q(const std::string& s) { return "'" + s + "'"; }

std::vector<std::string> note_lines(const std::string& err) {
  std::vector<std::string> out;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("note: ", 0) == 0) out.push_back(line);
  return out;
}

// Each no-op flag: exit 0, one note naming it, and the same tokens as without it.
TEST(LlamaFlags, NoOpFlagsPrintOneNoteAndChangeNothing) {
  const std::string rest = "-p 'Once upon a time' -n 6 --temp 0 --json ";
  const std::string base = "generate " + rest;
  CmdResult plain = run(base);
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_TRUE(note_lines(plain.err).empty()) << plain.err;
  const json want = json::parse(plain.out)["output_ids"];
  struct Case {
    const char* flags;
    const char* note;
  };
  for (const Case& c : {Case{"-ngl 99", "note: -ngl 99: layers are placed automatically"},
                        Case{"--n-gpu-layers 99", "note: -ngl 99: layers are placed automatically"},
                        Case{"--gpu-layers all", "note: -ngl all: layers are placed automatically"},
                        Case{"-fa on", "note: -fa: attention here is always paged and fused"},
                        Case{"-fa auto", "note: -fa: attention here is always paged and fused"},
                        Case{"-fa off", "note: -fa off: attention here is always paged and fused"},
                        Case{"-fa 1", "note: -fa: attention here is always paged and fused"},
                        Case{"--flash-attn", "note: -fa: attention here is always paged and fused"},
                        Case{"-ub 128", "note: -ub: a step runs its tokens"},
                        Case{"--ubatch-size 64", "note: -ub: a step runs its tokens"},
                        Case{"--jinja", "note: --jinja: generate applies no chat template"},
                        Case{"--no-jinja", "note: --no-jinja: generate applies no chat template"},
                        Case{"-ngl 99 -ngl 99", "note: -ngl 99: layers are placed automatically"}}) {
    // The flag first (a value-less -fa must not swallow what follows) and last.
    for (const std::string& args : {"generate " + std::string(c.flags) + " " + rest, base + c.flags}) {
      CmdResult r = run(args);
      ASSERT_EQ(r.code, 0) << args << ": " << r.err;
      const auto notes = note_lines(r.err);
      ASSERT_EQ(notes.size(), 1u) << args << ": " << r.err;
      EXPECT_EQ(notes[0].rfind(c.note, 0), 0u) << args << ": " << notes[0];
      EXPECT_EQ(json::parse(r.out)["output_ids"], want) << args;
    }
  }
  CmdResult both = run(base + "-ngl 99 -fa on --jinja -ub 32");
  ASSERT_EQ(both.code, 0) << both.err;
  EXPECT_EQ(note_lines(both.err).size(), 4u) << both.err;
}

TEST(LlamaFlags, BadValuesAreUsageErrors) {
  for (const char* args : {"generate -ngl many", "generate -fa maybe", "generate -ub 0",
                           "chat --jinja --no-jinja --message hi", "generate -b 0"}) {
    CmdResult r = run(args);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
  // -hf still cannot be done: an error with what to do instead.
  CmdResult hf = run("generate -hf org/model -p hi");
  EXPECT_EQ(hf.code, 1);
  EXPECT_NE(hf.err.find("pass a GGUF file with -m FILE"), std::string::npos) << hf.err;
}

// The flags are accepted wherever the command plans memory.
TEST(LlamaFlags, EveryCommandTakesThem) {
  const std::string flags = " -ngl 99 -fa on -ub 64 -c 256 ";
  const std::string text = q(test::data_path("stories260K.README.md"));
  for (const std::string& cmd :
       {"plan --json" + flags, "bench --concurrency 2 --requests 2 --prompt-len 8 --gen-len 4" + flags,
        "perplexity -f " + text + " --json" + flags + "-b 64",
        "chat --message hi -n 2 --json --jinja --mlock --no-mmap" + flags,
        "generate -p hi -n 2 --mlock --no-mmap" + flags}) {
    CmdResult r = run(cmd);
    ASSERT_EQ(r.code, 0) << cmd << ": " << r.err;
    const auto notes = note_lines(r.err);
    EXPECT_EQ(notes.size(), cmd.find("--jinja") != std::string::npos ? 4u : 3u)
        << cmd << ": " << r.err;
  }
}

// --parallel and -np are --max-num-seqs; -b and --batch-size are --max-batched-tokens.
TEST(LlamaFlags, AliasesLandWhereOursDo) {
  for (const char* flag : {"--parallel 3", "-np 3", "--max-num-seqs 3"}) {
    CmdResult r = run(std::string("plan --json ") + flag);
    ASSERT_EQ(r.code, 0) << flag << ": " << r.err;
    EXPECT_EQ(json::parse(r.out)["max_num_seqs"], 3) << flag;
  }
  auto workspace = [](const std::string& flags) {
    CmdResult r = run("plan --json -c 4096 " + flags);
    EXPECT_EQ(r.code, 0) << flags << ": " << r.err;
    return json::parse(r.out)["devices"].back()["workspace_bytes"].get<uint64_t>();
  };
  const uint64_t ours = workspace("--max-batched-tokens 64");
  EXPECT_EQ(workspace("-b 64"), ours);
  EXPECT_EQ(workspace("--batch-size 64"), ours);
  EXPECT_NE(workspace("-b 1024"), ours);  // the value matters: the workspace follows it
  // perplexity's -b is the same flag: tokens per forward pass.
  const std::string text = q(test::data_path("stories260K.README.md"));
  CmdResult a = run("perplexity -f " + text + " -c 64 -b 16 --json");
  CmdResult b = run("perplexity -f " + text + " -c 64 --max-batched-tokens 16 --json");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(json::parse(a.out)["ppl"], json::parse(b.out)["ppl"]);
}

// -ngl 0: no GPU layers, so a declared GPU contradicts it.
TEST(LlamaFlags, NglZeroKeepsLayersOffTheGpus) {
  CmdResult r = run("plan -ngl 0 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json plan = json::parse(r.out);  // (a range-for over a temporary's member would dangle)
  for (const auto& d : plan["devices"]) EXPECT_NE(d["kind"], "cuda") << d;
  const auto notes = note_lines(r.err);
  ASSERT_EQ(notes.size(), 1u) << r.err;
  EXPECT_NE(notes[0].find("no layers on a GPU"), std::string::npos) << notes[0];
  CmdResult gpu = run("plan -ngl 0 --device cuda:0=1GiB");
  EXPECT_EQ(gpu.code, 1);
  EXPECT_NE(gpu.err.find("error: -ngl 0 keeps every layer off the GPUs, but --device cuda:0"),
            std::string::npos)
      << gpu.err;
  // Virtual CPU devices are not GPUs.
  CmdResult cpu = run("plan -ngl 0 --device cpu:0=64MiB --json");
  EXPECT_EQ(cpu.code, 0) << cpu.err;
}

// Every sampler default in --help, equal to the defaults the code uses.
TEST(LlamaFlags, HelpShowsSamplerDefaults) {
  const SamplingParams cli;  // generate and chat: llama.cpp's
  const SamplingParams server = SamplingDefaults::openai().params;
  struct Want {
    const char* cmd;
    SamplingParams p;
  };
  for (const Want& w : {Want{"generate", cli}, Want{"chat", cli}, Want{"serve", server}}) {
    CmdResult r = run(std::string(w.cmd) + " --help");
    ASSERT_EQ(r.code, 0) << w.cmd;
    for (const std::string& s :
         {fmt::format("--temp FLOAT:>= 0={}", w.p.temperature),
          fmt::format("--top-k INT:>= 0={}", w.p.top_k),
          fmt::format("--top-p FLOAT:0 to 1={}", w.p.top_p),
          fmt::format("--min-p FLOAT:0 to 1={}", w.p.min_p),
          fmt::format("--repeat-penalty FLOAT:> 0={}", w.p.repetition_penalty)})
      EXPECT_NE(r.out.find(s), std::string::npos) << w.cmd << ": " << s << "\n" << r.out;
    EXPECT_NE(r.out.find("general.sampling.temp"), std::string::npos) << w.cmd;
  }
  CmdResult gen = run("generate --help");
  EXPECT_NE(gen.out.find(fmt::format("--repeat-last-n INT:>= -1={}", cli.repeat_last_n)),
            std::string::npos)
      << gen.out;
  // perplexity's -c is its window.
  CmdResult ppl = run("perplexity --help");
  EXPECT_NE(ppl.out.find("Tokens per window"), std::string::npos) << ppl.out;
}

// chat --no-jinja: the family's built-in template (the shipped model has none
// of its own and no family markers: chatml), the same prompt as naming it.
TEST(LlamaFlags, ChatNoJinjaUsesTheBuiltInTemplate) {
  CmdResult plain = run("chat --no-jinja --message hi -n 2 --temp 0 --json");
  CmdResult named = run("chat --chat-template chatml --message hi -n 2 --temp 0 --json");
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(named.code, 0) << named.err;
  EXPECT_EQ(json::parse(plain.out)["turns"][0]["prompt"], json::parse(named.out)["turns"][0]["prompt"]);
  EXPECT_NE(plain.err.find("note: --no-jinja: using the built-in 'chatml' template"),
            std::string::npos)
      << plain.err;
  CmdResult both = run("chat --no-jinja --chat-template llama3 --message hi -n 2 --json");
  ASSERT_EQ(both.code, 0) << both.err;
  EXPECT_NE(both.err.find("note: --no-jinja: --chat-template already chooses the template"),
            std::string::npos)
      << both.err;
}

// "1 full-attention layer", not "layers".
TEST(LlamaFlags, PlanCountsOneLayerInTheSingular) {
  test::TempPath model(".gguf");
  CmdResult mk = run("make-model --arch gemma2 --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 "
                     "--n-ff 128 --sliding-window 32 --n-ctx 256 --type q8_0 --vocab-from " +
                     q(test::data_path("stories260K.gguf")) + " -o " + q(model.path));
  ASSERT_EQ(mk.code, 0) << mk.err;
  CmdResult r = run("plan -m " + q(model.path) + " -c 512");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 full-attention layer:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 layer with window 32"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pagellm
