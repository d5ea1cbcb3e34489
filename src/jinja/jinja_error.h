// Errors of the Jinja template engine. Every error names the template and the
// position (line:column, both 1-based; columns count code points) where it was
// found, as "NAME:LINE:COL: message".
#pragma once

#include <string>

#include "util/error.h"

namespace pagellm::jinja {

struct SourcePos {
  int line = 0;    // 0: unknown
  int column = 0;  // code points, 1-based
};

// A syntax error, an unknown construct, or a runtime error (type mismatch,
// undefined value used, a limit exceeded).
class TemplateError : public Error {
 public:
  TemplateError(const std::string& template_name, SourcePos pos, const std::string& message);

  const std::string& template_name() const { return template_name_; }
  SourcePos pos() const { return pos_; }
  // The message without the "NAME:LINE:COL: " prefix.
  const std::string& message() const { return message_; }

 private:
  std::string template_name_;
  SourcePos pos_;
  std::string message_;
};

// `raise_exception(msg)` called by the template itself: the template refuses its
// input (e.g. "Conversation roles must alternate user/assistant/..."). message()
// is the template's own text.
class TemplateRaised : public TemplateError {
 public:
  using TemplateError::TemplateError;
};

// Thrown inside the engine where the template name is not known yet; the
// template facade rethrows it as TemplateError with its name.
struct PositionedError {
  SourcePos pos;
  std::string message;
  bool raised = false;  // from raise_exception()
};

}  // namespace pagellm::jinja
