#include "util/read_file.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace pagellm {

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SystemError(errno_message("cannot read " + path, errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw SystemError(errno_message("cannot read " + path, errno));
  return ss.str();
}

}  // namespace pagellm
