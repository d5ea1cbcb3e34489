// Replays every committed fuzz input (tests/fuzz/corpus/<target>/, the seeds)
// and every crash reproducer (tests/fuzz/regressions/<target>/, one file per
// bug found and fixed) through the same entry points the fuzzers use, so
// CI checks them without clang or libFuzzer. Under scripts/sanitize.sh the
// sanitizers watch the replay too.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

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

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, ::testing::ValuesIn(targets()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pagellm::fuzz
