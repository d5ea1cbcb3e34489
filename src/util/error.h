// Exceptions with exact messages. Load, config and validation errors are
// thrown as one of these; they never cross a thread boundary.
#pragma once

#include <stdexcept>
#include <string>

namespace pagellm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// A file on disk is malformed (GGUF, tokenizer data, ...).
class FormatError : public Error {
 public:
  using Error::Error;
};

// A user-supplied option or request is invalid.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// An operating-system call failed (open, mmap, read, ...).
class SystemError : public Error {
 public:
  using Error::Error;
};

// Formats "what: strerror(errno)".
std::string errno_message(const std::string& what, int err);

}  // namespace pagellm
