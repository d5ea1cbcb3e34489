// The built-in chat page (GET /): the files under src/server/ui/, embedded
// in the binary at build time (cmake/embed_files.cmake writes them into a
// generated .cpp as byte arrays), so the page needs nothing from outside the
// server: no CDN, no files next to the binary.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pagellm {

struct WebAsset {
  std::string_view path;  // relative to src/server/ui, e.g. "index.html"
  std::string_view content_type;
  std::string_view body;
};

// The asset at `path` ("index.html", "app.js", ...), or nullptr.
const WebAsset* find_web_asset(std::string_view path);

// The Content-Security-Policy the page is served with: its own scripts,
// styles and API only, so even a rendering bug cannot run injected script or
// load anything from elsewhere.
std::string_view web_ui_csp();

}  // namespace pagellm
