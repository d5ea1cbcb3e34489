#include "server/web_ui.h"

#include <vector>

// Defined in the generated web_ui_files.cpp: each file's name and bytes.
namespace pagellm::web_ui_files {
struct File {
  const char* name;
  const unsigned char* data;
  size_t size;
};
extern const File kFiles[];
extern const size_t kFileCount;
}  // namespace pagellm::web_ui_files

namespace pagellm {

namespace {

std::string_view content_type_of(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

const std::vector<WebAsset>& assets() {
  static const std::vector<WebAsset> all = [] {
    std::vector<WebAsset> v;
    for (size_t i = 0; i < web_ui_files::kFileCount; ++i) {
      const auto& f = web_ui_files::kFiles[i];
      v.push_back({f.name, content_type_of(f.name),
                   std::string_view(reinterpret_cast<const char*>(f.data), f.size)});
    }
    return v;
  }();
  return all;
}

}  // namespace

const WebAsset* find_web_asset(std::string_view path) {
  for (const auto& a : assets())
    if (a.path == path) return &a;
  return nullptr;
}

std::string_view web_ui_csp() {
  return "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
         "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
}

}  // namespace pagellm
