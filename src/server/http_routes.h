// The HTTP server's route table: every endpoint once, with its method, path,
// whether --api-key applies and whether it is an API path (CORS pre-flights
// answered; on exact paths, the other methods get 405 naming the allowed
// ones). The httplib handlers, the 405 answers, the pre-flight and key
// checks and the access-log / metrics labels all come from this one list, so
// adding an endpoint is adding one row (http_server.cpp builds the rows).
#pragma once

#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace pagellm {

using RouteHandler = std::function<void(const httplib::Request&, httplib::Response&)>;

struct Route {
  const char* method;  // GET, POST or DELETE
  std::string path;    // exact, or a regex when it holds '(' (as httplib takes it)
  std::string label;   // access log and metrics, one per route (never per id); "": the path
  bool needs_key;      // --api-key applies
  bool api;            // pre-flight OPTIONS answered; other methods get 405 (exact paths)
  RouteHandler handler;
  std::optional<std::regex> re;  // compiled by RouteTable for regex paths

  bool matches(const std::string& p) const { return re ? std::regex_match(p, *re) : path == p; }
};

class RouteTable {
 public:
  RouteTable() = default;
  explicit RouteTable(std::vector<Route> routes);

  // The first route for `path` (any method), or nullptr.
  const Route* find(const std::string& path) const;
  // Unknown paths under /v1/ count as API paths that need the key, so that
  // without it they do not tell which endpoints exist.
  bool needs_key(const std::string& path) const;
  bool api_path(const std::string& path) const;
  std::string label(const std::string& path) const;  // "other" for unknown paths

  // Registers each route's handler, and not_allowed(allow) ("GET", "POST,
  // DELETE", ...) for every method an exact API path lacks.
  void install(httplib::Server& svr,
               const std::function<RouteHandler(const std::string& allow)>& not_allowed) const;

 private:
  std::vector<Route> routes_;
};

}  // namespace pagellm
