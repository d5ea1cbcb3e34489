#include "jinja/jinja_template.h"

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_parser.h"

namespace pagellm::jinja {

Template Template::parse(std::string_view source, std::string name, const LexerOptions& opts) {
  try {
    auto body = std::make_shared<const StmtList>(jinja::parse(tokenize(source, opts)));
    return Template(std::move(name), std::move(body));
  } catch (const PositionedError& e) {
    throw TemplateError(name, e.pos, e.message);
  }
}

std::string Template::render(const Dict& vars, const RenderOptions& opts) const {
  auto root = std::make_shared<Scope>();
  add_globals(*root);
  for (const auto& [k, v] : vars.entries()) root->set(k.to_str(), v);
  Evaluator ev(opts);
  try {
    return ev.render(*body_, root);
  } catch (const PositionedError& e) {
    if (e.raised) throw TemplateRaised(name_, e.pos, e.message);
    throw TemplateError(name_, e.pos, e.message);
  }
}

}  // namespace pagellm::jinja
