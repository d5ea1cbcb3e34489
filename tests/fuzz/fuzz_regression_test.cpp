// Replays every committed fuzz input (tests/fuzz/corpus/<target>/, the seeds)
// and every crash reproducer (tests/fuzz/regressions/<target>/, one file per
// bug found and fixed) through the same entry points the fuzzers use, so
// CI checks them without clang or libFuzzer. Under scripts/sanitize.sh the
// sanitizers watch the replay too.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "entries/fuzz_entries.h"
#include "support/test_support.h"

namespace pagellm::fuzz {
namespace {

namespace fs = std::filesystem;

}  // namespace

// Test names show the target, not its bytes.
void PrintTo(const Target& t, std::ostream* os) {
  *os << t.name;
}

namespace {

std::vector<fs::path> inputs(const std::string& kind, const std::string& target) {
  std::vector<fs::path> files;
  const fs::path dir = fs::path(PAGELLM_FUZZ_DIR) / kind / target;
  if (!fs::exists(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

void replay(const std::string& kind, const Target& t) {
  const auto files = inputs(kind, t.name);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const std::string bytes = test::read_file(f.string());
    EXPECT_EQ(t.fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
  }
  std::printf("%s/%s: %zu inputs\n", kind.c_str(), t.name.c_str(), files.size());
}

class FuzzReplay : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzReplay, Corpus) {
  const auto n = inputs("corpus", GetParam().name).size();
  EXPECT_GT(n, 0u) << "no seeds for " << GetParam().name;
  replay("corpus", GetParam());
}

TEST_P(FuzzReplay, Regressions) {
  replay("regressions", GetParam());
}

// A short mutation run in every test pass, for the parsers whose inputs are
// small (grammars, schemas, device maps, tool-call replies, Responses and
// Anthropic request bodies, pipeline step messages): seeds with random bytes flipped,
// inserted, deleted and spliced, deterministic. libFuzzer (scripts/fuzz.sh)
// goes much further; this keeps the obvious crashes out of every build.
TEST_P(FuzzReplay, SeedMutations) {
  const Target& t = GetParam();
  if (t.name != "grammar" && t.name != "json_schema" && t.name != "device_map" &&
      t.name != "tool_calls" && t.name != "responses_request" && t.name != "anthropic_request" &&
      t.name != "embeddings_request" &&
      t.name != "llama_request" && t.name != "step_message" && t.name != "block_file")
    GTEST_SKIP() << t.name << ": its inputs are large; scripts/fuzz.sh covers it";
  std::vector<std::string> seeds;
  for (const auto& f : inputs("corpus", t.name)) seeds.push_back(test::read_file(f.string()));
  ASSERT_FALSE(seeds.empty());
  std::mt19937 rng(12345);
  static const char* const kTokens[] = {"::=", "|", "*", "+", "?", "{", "}", "(", ")", "[", "]",
                                        "\\", "\"", "{1,3}", "[^", "\\u00", "$ref", "#/$defs/",
                                        "\"type\"", "experts:", ",", "-", ":", "\n",
                                        "null", "\"input_text\"", "\"text\"", "[]", "{}"};
  int runs = 0;
  for (int iter = 0; iter < 30000; ++iter) {
    std::string s = seeds[rng() % seeds.size()];
    for (int m = 1 + static_cast<int>(rng() % 4); m > 0; --m) {
      const size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 5) {
        case 0:
          if (!s.empty()) s[std::min(pos, s.size() - 1)] = static_cast<char>(rng());
          break;
        case 1:
          s.insert(pos, 1, static_cast<char>(rng() % 128));
          break;
        case 2:
          if (!s.empty()) s.erase(std::min(pos, s.size() - 1), 1 + rng() % 4);
          break;
        case 3:
          s.insert(pos, kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))]);
          break;
        default: {
          const std::string& other = seeds[rng() % seeds.size()];
          if (!other.empty()) s.insert(pos, other.substr(rng() % other.size(), 1 + rng() % 16));
        }
      }
    }
    EXPECT_EQ(t.fn(reinterpret_cast<const uint8_t*>(s.data()), s.size()), 0);
    ++runs;
  }
  std::printf("%s: %d mutated inputs\n", t.name.c_str(), runs);
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, ::testing::ValuesIn(targets()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pagellm::fuzz
