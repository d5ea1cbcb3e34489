#include "jinja/jinja_error.h"

namespace pagellm::jinja {
namespace {

std::string format_message(const std::string& name, SourcePos pos, const std::string& message) {
  std::string out = name;
  if (pos.line > 0) {
    out += ':' + std::to_string(pos.line) + ':' + std::to_string(pos.column);
  }
  return out + ": " + message;
}

}  // namespace

TemplateError::TemplateError(const std::string& template_name, SourcePos pos,
                             const std::string& message)
    : Error(format_message(template_name, pos, message)),
      template_name_(template_name),
      pos_(pos),
      message_(message) {}

}  // namespace pagellm::jinja
