#include "server/http_routes.h"

#include <httplib.h>

#include <algorithm>
#include <utility>

namespace pagellm {

RouteTable::RouteTable(std::vector<Route> routes) : routes_(std::move(routes)) {
  for (Route& r : routes_) {
    if (r.label.empty()) r.label = r.path;
    if (r.path.find('(') != std::string::npos) r.re.emplace(r.path);
  }
}

const Route* RouteTable::find(const std::string& path) const {
  for (const Route& r : routes_)
    if (r.matches(path)) return &r;
  return nullptr;
}

bool RouteTable::needs_key(const std::string& path) const {
  const Route* r = find(path);
  return r ? r->needs_key : path.rfind("/v1/", 0) == 0;
}

bool RouteTable::api_path(const std::string& path) const {
  const Route* r = find(path);
  return r ? r->api : path.rfind("/v1/", 0) == 0;
}

std::string RouteTable::label(const std::string& path) const {
  const Route* r = find(path);
  return r ? r->label : "other";
}

void RouteTable::install(
    httplib::Server& svr,
    const std::function<RouteHandler(const std::string& allow)>& not_allowed) const {
  std::vector<std::pair<std::string, std::string>> allowed;  // exact API path, its methods
  for (const Route& r : routes_) {
    const std::string m = r.method;
    if (m == "GET")
      svr.Get(r.path, r.handler);
    else if (m == "POST")
      svr.Post(r.path, r.handler);
    else
      svr.Delete(r.path, r.handler);
    if (!r.api || r.re) continue;
    auto it = std::find_if(allowed.begin(), allowed.end(),
                           [&](const auto& a) { return a.first == r.path; });
    if (it == allowed.end())
      allowed.emplace_back(r.path, m);
    else
      it->second += ", " + m;
  }
  for (const auto& [path, allow] : allowed) {
    const RouteHandler handler = not_allowed(allow);
    auto lacks = [&allow](const char* m) { return allow.find(m) == std::string::npos; };
    if (lacks("GET")) svr.Get(path, handler);
    if (lacks("POST")) svr.Post(path, handler);
    if (lacks("PUT")) svr.Put(path, handler);
    if (lacks("DELETE")) svr.Delete(path, handler);
  }
}

}  // namespace pagellm
