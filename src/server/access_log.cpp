#include "server/access_log.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "server/openai_response.h"

namespace pagellm {

std::string AccessLog::format(const AccessRecord& r) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::ordered_json j;
  j["event"] = "access";
  j["time"] = std::round(now * 1000.0) / 1000.0;
  j["id"] = r.id;
  j["method"] = r.method;
  j["path"] = r.path;
  j["status"] = r.status;
  if (r.completion) {
    j["stream"] = r.stream;
    j["prompt_tokens"] = r.prompt_tokens;
    j["completion_tokens"] = r.completion_tokens;
    j["cached_tokens"] = r.cached_tokens;
    if (r.ttft_s >= 0) j["ttft_ms"] = std::round(r.ttft_s * 1e4) / 10.0;
    if (!r.finish_reason.empty()) j["finish_reason"] = r.finish_reason;
  }
  j["duration_ms"] = std::round(r.duration_s * 1e4) / 10.0;
  if (!r.error.empty()) j["error"] = r.error;
  j["remote"] = r.remote;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void AccessLog::write(const AccessRecord& r) {
  const std::string line = format(r);
  std::lock_guard<std::mutex> lock(mu_);
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

}  // namespace pagellm
