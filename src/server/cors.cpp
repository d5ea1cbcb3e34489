#include "server/cors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "util/error.h"

namespace pagellm {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

CorsPolicy::CorsPolicy(std::vector<std::string> origins) {
  for (auto& o : origins) {
    if (o == "*") {
      any_ = true;
    } else {
      if (o.empty()) throw ConfigError("--cors-origin: an origin must not be empty");
      // An origin is scheme://host[:port]; browsers send it without a path
      // or a trailing slash, so one written with them would never match.
      const size_t scheme = o.find("://");
      if (scheme == std::string::npos || o.find('/', scheme + 3) != std::string::npos)
        throw ConfigError(fmt::format(
            "--cors-origin: '{}' is not an origin (scheme://host[:port], no path), or '*'", o));
      o = lower(o);  // scheme and host compare without case
    }
    origins_.push_back(o);
  }
}

bool CorsPolicy::allows(const std::string& origin) const {
  if (origin.empty() || !enabled()) return false;
  if (any_) return true;
  return std::find(origins_.begin(), origins_.end(), lower(origin)) != origins_.end();
}

CorsPolicy::Headers CorsPolicy::response_headers(const std::string& origin) const {
  if (!allows(origin)) return {};
  Headers h;
  if (any_) {
    h.emplace_back("Access-Control-Allow-Origin", "*");
  } else {
    h.emplace_back("Access-Control-Allow-Origin", origin);
    h.emplace_back("Vary", "Origin");  // the answer depends on the Origin: caches must know
  }
  h.emplace_back("Access-Control-Expose-Headers", "X-Request-Id, Retry-After");
  return h;
}

CorsPolicy::Headers CorsPolicy::preflight_headers(const std::string& origin,
                                                  const std::string& request_headers) const {
  Headers h = response_headers(origin);
  if (h.empty()) return h;
  std::vector<std::string> allowed = {"Authorization", "Content-Type", "x-api-key",
                                      "anthropic-version", "anthropic-beta"};
  // Client libraries send headers of their own (x-stainless-*, OpenAI-Beta):
  // whatever the pre-flight asks for is allowed too, as the key is what guards the API.
  size_t at = 0;
  while (at <= request_headers.size()) {
    size_t comma = request_headers.find(',', at);
    if (comma == std::string::npos) comma = request_headers.size();
    std::string name = trim(request_headers.substr(at, comma - at));
    bool valid = !name.empty();
    for (char c : name)
      valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_');
    if (valid && std::none_of(allowed.begin(), allowed.end(),
                              [&](const std::string& a) { return lower(a) == lower(name); }))
      allowed.push_back(name);
    at = comma + 1;
  }
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  h.emplace_back("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
  h.emplace_back("Access-Control-Allow-Headers", list);
  h.emplace_back("Access-Control-Max-Age", std::to_string(kMaxAgeSeconds));
  return h;
}

}  // namespace pagellm
