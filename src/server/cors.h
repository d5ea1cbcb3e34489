// Cross-origin access (CORS) for browsers on other origins: off unless
// --cors-origin lists origins (or "*", any origin). A listed Origin gets
// Access-Control-Allow-Origin on every response; a pre-flight OPTIONS is
// answered with the methods and headers the APIs take (Authorization,
// Content-Type, x-api-key, anthropic-version, ...). An Origin that is not
// listed gets no allow header, so the browser refuses the response. Without
// the flag no CORS header is ever sent.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pagellm {

class CorsPolicy {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;

  CorsPolicy() = default;
  // Throws ConfigError for an origin that is empty or has a path
  // ("https://a.example/x"); "*" allows every origin.
  explicit CorsPolicy(std::vector<std::string> origins);

  bool enabled() const { return !origins_.empty(); }
  bool allows(const std::string& origin) const;

  // The headers for an ordinary response to a request with this Origin
  // (empty when the origin is not allowed or absent).
  Headers response_headers(const std::string& origin) const;
  // The headers for a pre-flight: the above plus Allow-Methods,
  // Allow-Headers (those asked for in `request_headers` are added) and Max-Age.
  Headers preflight_headers(const std::string& origin, const std::string& request_headers) const;

  static constexpr int kMaxAgeSeconds = 86400;

 private:
  std::vector<std::string> origins_;
  bool any_ = false;
};

}  // namespace pagellm
