// The error every API request path throws: an HTTP status and OpenAI's
// fields; each API writes it in its own shape (openai_response.h's
// error_json, anthropic_api.h's anthropic_error_json).
#pragma once

#include <string>

#include "util/error.h"

namespace pagellm {

// An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
class ApiError : public Error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error",
           std::string param = "", std::string code = "")
      : Error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type;
  std::string param;  // empty: null
  std::string code;   // empty: null
};

// The 400 every request parser throws for a bad field: `param` names it (in
// the error's "param"), `code` is OpenAI's machine-readable code if any.
[[noreturn]] inline void bad_request(const std::string& param, const std::string& message,
                                     const std::string& code = "") {
  throw ApiError(400, message, "invalid_request_error", param, code);
}

}  // namespace pagellm
