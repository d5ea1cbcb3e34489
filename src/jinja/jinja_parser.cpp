#include "jinja/jinja_parser.h"

#include <initializer_list>

#include "jinja/jinja_expr_parser.h"
#include "jinja/jinja_token_stream.h"

namespace pagellm::jinja {
namespace {

// The statement half of the parser; expressions go to ExpressionParser.
class Parser : public TokenStream {
 public:
  explicit Parser(std::vector<Token> tokens) : TokenStream(std::move(tokens)), expr_(*this) {}

  StmtList parse_template() {
    StmtList body = subparse({});
    if (cur().type != TokenType::kEof) fail(cur().pos, "unexpected " + describe(cur()));
    return body;
  }

 private:
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                      bool explicit_parens) {
    return expr_.parse_tuple(with_condexpr, extra_end, explicit_parens);
  }
  ExprPtr parse_expression(bool with_condexpr) { return expr_.parse_expression(with_condexpr); }
  ExprPtr parse_filter_chain(ExprPtr input, bool start_inline) {
    return expr_.parse_filter_chain(std::move(input), start_inline);
  }

  // ---- statements ----
  struct OpenBlock {
    std::string tag;
    SourcePos pos;
    std::vector<std::string_view> ends;
  };

  StmtList subparse(std::vector<std::string_view> end_tags) {
    StmtList body;
    while (cur().type != TokenType::kEof) {
      const Token& t = cur();
      if (t.type == TokenType::kData) {
        body.push_back(std::make_unique<TextStmt>(t.pos, t.text));
        next();
      } else if (t.type == TokenType::kVarBegin) {
        const SourcePos pos = t.pos;
        next();
        ExprPtr e = parse_tuple(true, {}, false);
        if (cur().type != TokenType::kVarEnd) {
          fail(cur().pos, "expected end of print statement '}}', got " + describe(cur()));
        }
        next();
        body.push_back(std::make_unique<PrintStmt>(pos, std::move(e)));
      } else if (t.type == TokenType::kBlockBegin) {
        next();
        if (cur().type == TokenType::kName) {
          for (std::string_view e : end_tags) {
            if (cur().text == e) return body;
          }
        }
        body.push_back(parse_statement());
        expect_block_end();
      } else {
        fail(t.pos, "unexpected " + describe(t));
      }
    }
    if (!blocks_.empty()) {
      const OpenBlock& b = blocks_.back();
      std::string ends;
      for (size_t k = 0; k < b.ends.size(); ++k) {
        ends += (k ? " or '" : "'") + std::string(b.ends[k]) + "'";
      }
      fail(b.pos,
           "unexpected end of template: the '" + b.tag + "' block opened here needs " + ends);
    }
    return body;
  }

  // After the tag's own arguments: `%}`, a body up to one of `ends`; leaves the
  // stream at the end tag's name.
  StmtList parse_body(const std::string& tag, SourcePos pos, std::vector<std::string_view> ends) {
    expect_block_end();
    blocks_.push_back(OpenBlock{tag, pos, ends});
    StmtList body = subparse(ends);
    blocks_.pop_back();
    return body;
  }

  // parse_body for a body that runs apart from any enclosing loop (for's else
  // branch, a captured set or filter block, a macro): break and continue in it
  // have no loop to leave.
  StmtList parse_body_outside_loop(const std::string& tag, SourcePos pos,
                                   std::vector<std::string_view> ends) {
    const int saved = loop_depth_;
    loop_depth_ = 0;
    StmtList body = parse_body(tag, pos, std::move(ends));
    loop_depth_ = saved;
    return body;
  }

  // Consumes the end tag's name (the caller's subparse expects its %}).
  void end_tag() { next(); }

  StmtPtr parse_statement() {
    const Token& t = cur();
    if (t.type != TokenType::kName) fail(t.pos, "tag name expected, got " + describe(t));
    DepthGuard guard(*this, t.pos);
    const std::string tag = t.text;
    const SourcePos pos = t.pos;
    if (tag == "if") return parse_if();
    if (tag == "for") return parse_for();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "print") {  // {% print a, b %} prints a then b
      next();
      auto s = std::make_unique<ScopeStmt>(pos);
      while (cur().type != TokenType::kBlockEnd) {
        if (!s->body.empty()) expect_op(",");
        const SourcePos epos = cur().pos;
        s->body.push_back(std::make_unique<PrintStmt>(epos, parse_expression(true)));
      }
      if (s->body.empty()) fail(cur().pos, "expected an expression, got " + describe(cur()));
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(pos, "'" + tag + "' outside of a for loop");
      next();
      return std::make_unique<SimpleStmt>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue,
                                          pos);
    }
    if (tag == "generation") {
      next();
      auto s = std::make_unique<ScopeStmt>(pos);
      s->body = parse_body(tag, pos, {"endgeneration"});
      end_tag();
      return s;
    }
    static const char* const unsupported[] = {"extends", "block",    "include",    "import",
                                              "from",    "call",     "autoescape", "do",
                                              "trans",   "pluralize"};
    for (const char* u : unsupported) {
      if (tag == u) fail(pos, "the '" + tag + "' tag is not supported");
    }
    std::string msg = "unknown tag '" + tag + "'";
    if (!blocks_.empty()) {
      const OpenBlock& b = blocks_.back();
      msg += " (the '" + b.tag + "' block opened at " + std::to_string(b.pos.line) + ":" +
             std::to_string(b.pos.column) + " is still open, expecting";
      for (size_t k = 0; k < b.ends.size(); ++k) {
        msg += (k ? " or '" : " '") + std::string(b.ends[k]) + "'";
      }
      msg += ")";
    }
    fail(pos, msg);
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<IfStmt>(cur().pos);
    const SourcePos pos = cur().pos;
    next();
    while (true) {
      ExprPtr test = parse_tuple(false, {}, false);
      StmtList body = parse_body("if", pos, {"elif", "else", "endif"});
      s->branches.emplace_back(std::move(test), std::move(body));
      const std::string which = next().text;
      if (which == "elif") continue;
      if (which == "else") {
        s->otherwise = parse_body("if", pos, {"endif"});
        end_tag();
      }
      break;
    }
    return s;
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<ForStmt>(cur().pos);
    const SourcePos pos = cur().pos;
    next();
    s->target = parse_targets({"in"});
    expect_name("in");
    s->iter = parse_tuple(false, {"recursive"}, false);
    if (skip_name("if")) s->filter = parse_expression(true);
    s->recursive = skip_name("recursive");
    ++loop_depth_;
    s->body = parse_body("for", pos, {"endfor", "else"});
    --loop_depth_;
    if (next().text == "else") {
      s->otherwise = parse_body_outside_loop("for", pos, {"endfor"});
      end_tag();
    }
    return s;
  }

  StmtPtr parse_set() {
    const SourcePos pos = cur().pos;
    next();
    Target target;
    if (cur().type == TokenType::kName && look().type == TokenType::kOperator &&
        look().text == ".") {
      target.kind = Target::Kind::kNamespaceAttr;
      target.pos = cur().pos;
      target.name = next().text;
      next();
      target.attr = expect_any_name("attribute name").text;
    } else {
      target = parse_targets({});
    }
    if (skip_op("=")) {
      auto s = std::make_unique<SetStmt>(pos);
      s->target = std::move(target);
      s->value = parse_tuple(true, {}, false);
      return s;
    }
    auto s = std::make_unique<SetBlockStmt>(pos);
    s->target = std::move(target);
    if (is_op("|")) s->filter = parse_filter_chain(nullptr, false);
    s->body = parse_body_outside_loop("set", pos, {"endset"});
    end_tag();
    return s;
  }

  StmtPtr parse_macro() {
    auto s = std::make_unique<MacroStmt>(cur().pos);
    const SourcePos pos = cur().pos;
    next();
    s->name = expect_any_name("macro name").text;
    expect_op("(");
    bool defaults = false;
    while (!is_op(")")) {
      if (!s->params.empty()) {
        expect_op(",");
        if (is_op(")")) break;
      }
      const Token& p = expect_any_name("parameter name");
      std::string pname = p.text;
      ExprPtr def;
      if (skip_op("=")) {
        def = parse_expression(true);
        defaults = true;
      } else if (defaults) {
        fail(p.pos, "non-default parameter '" + pname + "' follows a parameter with a default");
      }
      s->params.emplace_back(std::move(pname), std::move(def));
    }
    expect_op(")");
    s->body = parse_body_outside_loop("macro", pos, {"endmacro"});
    end_tag();
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = std::make_unique<FilterBlockStmt>(cur().pos);
    const SourcePos pos = cur().pos;
    next();
    s->filter = parse_filter_chain(nullptr, true);
    s->body = parse_body_outside_loop("filter", pos, {"endfilter"});
    end_tag();
    return s;
  }

  StmtPtr parse_with() {
    auto s = std::make_unique<WithStmt>(cur().pos);
    const SourcePos pos = cur().pos;
    next();
    while (cur().type != TokenType::kBlockEnd) {
      if (!s->assigns.empty()) expect_op(",");
      Target t = parse_targets({"="});
      expect_op("=");
      s->assigns.emplace_back(std::move(t), parse_expression(true));
    }
    s->body = parse_body("with", pos, {"endwith"});
    end_tag();
    return s;
  }

  // NAME (',' NAME)* or parenthesised groups of them; `ends`: names that stop it.
  Target parse_targets(std::initializer_list<std::string_view> ends) {
    Target tuple;
    tuple.kind = Target::Kind::kTuple;
    tuple.pos = cur().pos;
    bool is_tuple = false;
    while (true) {
      if (!tuple.items.empty()) expect_op(",");
      bool end = cur().type == TokenType::kBlockEnd || is_op(")");
      for (std::string_view e : ends) end = end || is_name(e) || is_op(e);
      if (end) break;
      tuple.items.push_back(parse_target_item());
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (tuple.items.empty())
      fail(cur().pos, "expected a name to assign to, got " + describe(cur()));
    if (!is_tuple) return std::move(tuple.items[0]);
    return tuple;
  }

  Target parse_target_item() {
    if (skip_op("(")) {
      Target t = parse_targets({});
      expect_op(")");
      return t;
    }
    const Token& n = expect_any_name("a name to assign to");
    static const char* const constants[] = {"true", "false", "none", "True", "False", "None"};
    for (const char* c : constants) {
      if (n.text == c) fail(n.pos, "cannot assign to '" + n.text + "'");
    }
    Target t;
    t.kind = Target::Kind::kName;
    t.name = n.text;
    t.pos = n.pos;
    return t;
  }

  ExpressionParser expr_;
  int loop_depth_ = 0;
  std::vector<OpenBlock> blocks_;
};

}  // namespace

StmtList parse(std::vector<Token> tokens) {
  return Parser(std::move(tokens)).parse_template();
}

}  // namespace pagellm::jinja
