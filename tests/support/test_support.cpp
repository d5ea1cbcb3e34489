#include "support/test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace pagellm::test {

std::string data_path(const std::string& rel) {
  return std::string(PAGELLM_TEST_DATA) + "/" + rel;
}

std::string shared_path(const std::string& rel) {
  const char* env = std::getenv("PAGELLM_SHARED");
  const std::string root = env && *env ? env : PAGELLM_SHARED_DIR;
  const std::string p = root + "/" + rel;
  return std::filesystem::exists(p) ? p : "";
}

std::string real_model_path(const std::string& file) {
  std::string root;
  if (const char* env = std::getenv("PAGELLM_MODEL_CACHE"); env && *env)
    root = env;
  else if (const char* home = std::getenv("HOME"); home && *home)
    root = std::string(home) + "/.cache/pagellm/models";
  else
    return "";
  const std::string p = root + "/" + file;
  return std::filesystem::exists(p) ? p : "";
}

std::string data_or_shared_path(const std::string& rel) {
  const std::string local = data_path(rel);
  return std::filesystem::exists(local) ? local : shared_path(rel);
}

TempPath::TempPath(const std::string& suffix) {
  static std::atomic<int> counter{0};
  path = (std::filesystem::temp_directory_path() /
          ("pagellm-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + suffix))
             .string();
}

TempPath::~TempPath() {
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

CmdResult run_command(const std::string& command) {
  TempPath err_path(".err");
  const std::string cmd = command + " 2>" + err_path.path;
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path.path);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace pagellm::test
