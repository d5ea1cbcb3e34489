// One structured line per HTTP request (JSON, to a FILE*, stderr by default):
//   {"event":"access","time":1712345678.123,"id":"chatcmpl-...","method":"POST",
//    "path":"/v1/chat/completions","status":200,"stream":true,"prompt_tokens":12,
//    "completion_tokens":40,"cached_tokens":0,"ttft_ms":8.1,"duration_ms":95.2,
//    "finish_reason":"stop","remote":"127.0.0.1"}
// Token counts, TTFT and finish_reason are present only for completions;
// "error" holds the message of an error response.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace pagellm {

struct AccessRecord {
  std::string id;
  std::string method;
  std::string path;
  std::string remote;
  int status = 0;
  bool completion = false;  // a completion request (token fields are meaningful)
  bool stream = false;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  double ttft_s = -1.0;  // < 0: no token
  double duration_s = 0.0;
  std::string finish_reason;
  std::string error;
};

class AccessLog {
 public:
  explicit AccessLog(std::FILE* out = stderr) : out_(out) {}
  void write(const AccessRecord& r);
  // The line write() prints (without the newline).
  static std::string format(const AccessRecord& r);

 private:
  std::mutex mu_;
  std::FILE* out_;
};

}  // namespace pagellm
