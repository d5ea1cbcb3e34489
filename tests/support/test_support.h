// Helpers shared by the test binaries: paths to test data, temp files.
#pragma once

#include <string>

namespace pagellm::test {

// Absolute path of a file under tests/data.
std::string data_path(const std::string& rel);
// Path of a file under the shared reference folder ($PAGELLM_SHARED, else the
// checkout's ../shared), or "" when it is not there: large reference models
// live there only (tests that need one skip, saying so).
std::string shared_path(const std::string& rel);
// A real model fetched from PyPI by scripts/fetch-real-models.sh into
// $PAGELLM_MODEL_CACHE (default ~/.cache/pagellm/models), or "" when absent.
std::string real_model_path(const std::string& file);
// tests/data/REL when it is there, else shared_path(REL) ("" when neither).
std::string data_or_shared_path(const std::string& rel);
// A fresh path under the system temp dir (file not created), removed by the
// returned guard's destructor.
struct TempPath {
  explicit TempPath(const std::string& suffix);
  ~TempPath();
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  std::string path;
};
// True in a build with AddressSanitizer (scripts/sanitize.sh): memory
// figures (RSS) then include the sanitizer's shadow memory and quarantine.
constexpr bool kSanitized =
#if defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

// Runs a shell command: its exit code (-1 if it did not exit normally), its
// stdout, and its stderr (through a temp file).
struct CmdResult {
  int code = -1;
  std::string out;
  std::string err;
};
CmdResult run_command(const std::string& command);

// Whole file contents.
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace pagellm::test
