// Helpers shared by the test binaries: paths to test data, temp files.
#pragma once

#include <string>

namespace pagellm::test {

// Absolute path of a file under tests/data.
std::string data_path(const std::string& rel);
// A fresh path under the system temp dir (file not created), removed by the
// returned guard's destructor.
struct TempPath {
  explicit TempPath(const std::string& suffix);
  ~TempPath();
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  std::string path;
};
// Whole file contents.
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace pagellm::test
