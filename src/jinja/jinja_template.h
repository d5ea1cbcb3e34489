// A parsed Jinja template: the engine's entry point.
//
//   auto t = jinja::Template::parse(source, "chatml");
//   jinja::Dict vars;
//   vars.set(jinja::Value("messages"), jinja::from_json(messages_json));
//   std::string text = t.render(vars);
//
// Parsing uses Hugging Face's settings by default (trim_blocks, lstrip_blocks,
// no trailing newline kept). Rendering sees the globals of jinja_builtins.h
// under the caller's variables. Errors (syntax, unknown tags/filters/tests,
// runtime errors, limits) throw TemplateError naming the template and the
// line:column; `raise_exception` in the template throws TemplateRaised.
// A Template is immutable once parsed and may be rendered from several
// threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_eval.h"
#include "jinja/jinja_lexer.h"
#include "jinja/jinja_value.h"

namespace pagellm::jinja {

class Template {
 public:
  // Throws TemplateError.
  static Template parse(std::string_view source, std::string name = "template",
                        const LexerOptions& opts = {});

  // Throws TemplateError (TemplateRaised for raise_exception).
  std::string render(const Dict& vars, const RenderOptions& opts = {}) const;

  const std::string& name() const { return name_; }

 private:
  Template(std::string name, std::shared_ptr<const StmtList> body)
      : name_(std::move(name)), body_(std::move(body)) {}

  std::string name_;
  std::shared_ptr<const StmtList> body_;
};

}  // namespace pagellm::jinja
