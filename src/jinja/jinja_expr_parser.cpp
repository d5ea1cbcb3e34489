#include "jinja/jinja_expr_parser.h"

#include "jinja/jinja_filters.h"
#include "jinja/jinja_tests.h"

namespace pagellm::jinja {

bool ExpressionParser::is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
  const TokenType t = ts_.cur().type;
  if (t == TokenType::kVarEnd || t == TokenType::kBlockEnd || ts_.is_op(")")) return true;
  for (std::string_view e : extra_end) {
    if (ts_.is_name(e)) return true;
  }
  return false;
}

ExprPtr ExpressionParser::parse_tuple(bool with_condexpr,
                                      std::initializer_list<std::string_view> extra_end,
                                      bool explicit_parens) {
  const SourcePos pos = ts_.cur().pos;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ts_.expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(parse_expression(with_condexpr));
    if (ts_.is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) {
      ts_.fail(ts_.cur().pos, "expected an expression, got " + describe(ts_.cur()));
    }
  }
  auto t = std::make_unique<ListExpr>(ExprKind::kTuple, pos);
  t->items = std::move(items);
  return t;
}

ExprPtr ExpressionParser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr ExpressionParser::parse_condexpr() {
  const SourcePos pos = ts_.cur().pos;
  TokenStream::ChainGuard chain(ts_);
  ExprPtr e = parse_or();
  while (ts_.is_name("if")) {
    chain.link(ts_.cur().pos);
    ts_.next();
    auto c = std::make_unique<CondExpr>(pos);
    c->test = parse_or();
    if (ts_.skip_name("else")) c->otherwise = parse_condexpr();
    c->then = std::move(e);
    e = std::move(c);
  }
  return e;
}

ExprPtr ExpressionParser::parse_or() {
  return parse_binary_chain(&ExpressionParser::parse_and, {{"or", BinaryOp::kOr}});
}

ExprPtr ExpressionParser::parse_and() {
  return parse_binary_chain(&ExpressionParser::parse_not, {{"and", BinaryOp::kAnd}});
}

ExprPtr ExpressionParser::parse_not() {
  if (ts_.is_name("not")) {
    const SourcePos pos = ts_.cur().pos;
    TokenStream::DepthGuard guard(ts_, pos);
    ts_.next();
    return std::make_unique<UnaryExpr>(pos, UnaryOp::kNot, parse_not());
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  const SourcePos pos = ts_.cur().pos;
  ExprPtr first = parse_math1();
  std::unique_ptr<CompareExpr> cmp;
  TokenStream::ChainGuard chain(ts_);
  while (true) {
    CompareOp op;
    if (ts_.is_op("==")) {
      op = CompareOp::kEq;
    } else if (ts_.is_op("!=")) {
      op = CompareOp::kNe;
    } else if (ts_.is_op("<")) {
      op = CompareOp::kLt;
    } else if (ts_.is_op("<=")) {
      op = CompareOp::kLe;
    } else if (ts_.is_op(">")) {
      op = CompareOp::kGt;
    } else if (ts_.is_op(">=")) {
      op = CompareOp::kGe;
    } else if (ts_.is_name("in")) {
      op = CompareOp::kIn;
    } else if (ts_.is_name("not") && ts_.look().type == TokenType::kName &&
               ts_.look().text == "in") {
      ts_.next();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    chain.link(ts_.cur().pos);
    ts_.next();
    if (!cmp) {
      cmp = std::make_unique<CompareExpr>(pos);
      cmp->first = std::move(first);
    }
    cmp->rest.emplace_back(op, parse_math1());
  }
  if (!cmp) return first;
  return cmp;
}

ExprPtr ExpressionParser::parse_binary_chain(
    ExprPtr (ExpressionParser::*next_level)(),
    std::initializer_list<std::pair<const char*, BinaryOp>> ops) {
  TokenStream::ChainGuard chain(ts_);
  ExprPtr e = (this->*next_level)();
  while (true) {
    const std::pair<const char*, BinaryOp>* hit = nullptr;
    for (const auto& op : ops) {
      // "and" and "or" are name tokens, the others operators.
      if (ts_.is_op(op.first) || ts_.is_name(op.first)) hit = &op;
    }
    if (!hit) break;
    const SourcePos pos = ts_.cur().pos;
    chain.link(pos);
    ts_.next();
    e = std::make_unique<BinaryExpr>(pos, hit->second, std::move(e), (this->*next_level)());
  }
  return e;
}

ExprPtr ExpressionParser::parse_math1() {
  return parse_binary_chain(&ExpressionParser::parse_concat,
                            {{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}});
}

ExprPtr ExpressionParser::parse_concat() {
  return parse_binary_chain(&ExpressionParser::parse_math2, {{"~", BinaryOp::kConcat}});
}

ExprPtr ExpressionParser::parse_math2() {
  return parse_binary_chain(&ExpressionParser::parse_pow, {{"*", BinaryOp::kMul},
                                                           {"/", BinaryOp::kDiv},
                                                           {"//", BinaryOp::kFloorDiv},
                                                           {"%", BinaryOp::kMod}});
}

ExprPtr ExpressionParser::parse_pow() {
  return parse_binary_chain(&ExpressionParser::parse_unary_f, {{"**", BinaryOp::kPow}});
}

ExprPtr ExpressionParser::parse_unary_f() {
  return parse_unary(true);
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
  const SourcePos pos = ts_.cur().pos;
  TokenStream::DepthGuard guard(ts_, pos);
  ExprPtr e;
  if (ts_.skip_op("-")) {
    e = std::make_unique<UnaryExpr>(pos, UnaryOp::kNeg, parse_unary(false));
  } else if (ts_.skip_op("+")) {
    e = std::make_unique<UnaryExpr>(pos, UnaryOp::kPos, parse_unary(false));
  } else {
    e = parse_primary();
  }
  TokenStream::ChainGuard chain(ts_);
  e = parse_postfix(std::move(e), chain);
  if (with_filter) e = parse_filter_expr(std::move(e), chain);
  return e;
}

ExprPtr ExpressionParser::parse_primary() {
  const Token& t = ts_.cur();
  const SourcePos pos = t.pos;
  switch (t.type) {
    case TokenType::kName: {
      ts_.next();
      if (t.text == "true" || t.text == "True")
        return std::make_unique<ConstExpr>(pos, Value(true));
      if (t.text == "false" || t.text == "False") {
        return std::make_unique<ConstExpr>(pos, Value(false));
      }
      if (t.text == "none" || t.text == "None") {
        return std::make_unique<ConstExpr>(pos, Value::none());
      }
      return std::make_unique<NameExpr>(pos, t.text);
    }
    case TokenType::kString: {
      std::string s;
      while (ts_.cur().type == TokenType::kString) s += ts_.next().text;
      return std::make_unique<ConstExpr>(pos, Value(std::move(s)));
    }
    case TokenType::kInteger:
      ts_.next();
      return std::make_unique<ConstExpr>(pos, Value(t.int_value));
    case TokenType::kFloat:
      ts_.next();
      return std::make_unique<ConstExpr>(pos, Value(t.float_value));
    case TokenType::kOperator:
      if (t.text == "(") {
        ts_.next();
        ExprPtr e = parse_tuple(true, {}, true);
        ts_.expect_op(")");
        return e;
      }
      if (t.text == "[") {
        ts_.next();
        auto l = std::make_unique<ListExpr>(ExprKind::kList, pos);
        while (!ts_.is_op("]")) {
          if (!l->items.empty()) {
            ts_.expect_op(",");
            if (ts_.is_op("]")) break;
          }
          l->items.push_back(parse_expression(true));
        }
        ts_.expect_op("]");
        return l;
      }
      if (t.text == "{") {
        ts_.next();
        auto d = std::make_unique<DictExpr>(pos);
        while (!ts_.is_op("}")) {
          if (!d->items.empty()) {
            ts_.expect_op(",");
            if (ts_.is_op("}")) break;
          }
          ExprPtr k = parse_expression(true);
          ts_.expect_op(":");
          d->items.emplace_back(std::move(k), parse_expression(true));
        }
        ts_.expect_op("}");
        return d;
      }
      break;
    default:
      break;
  }
  ts_.fail(pos, "unexpected " + describe(t));
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr e, TokenStream::ChainGuard& chain) {
  while (true) {
    if (ts_.is_op(".")) {
      const SourcePos pos = ts_.cur().pos;
      chain.link(pos);
      ts_.next();
      if (ts_.cur().type == TokenType::kName) {
        e = std::make_unique<AttrExpr>(pos, std::move(e), ts_.next().text);
      } else if (ts_.cur().type == TokenType::kInteger) {
        auto key = std::make_unique<ConstExpr>(ts_.cur().pos, Value(ts_.next().int_value));
        e = std::make_unique<ItemExpr>(pos, std::move(e), std::move(key));
      } else {
        ts_.fail(ts_.cur().pos, "expected a name or number after '.', got " + describe(ts_.cur()));
      }
    } else if (ts_.is_op("[")) {
      chain.link(ts_.cur().pos);
      e = parse_subscript(std::move(e));
    } else if (ts_.is_op("(")) {
      chain.link(ts_.cur().pos);
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr ExpressionParser::parse_filter_expr(ExprPtr e, TokenStream::ChainGuard& chain) {
  while (true) {
    if (ts_.is_op("|")) {
      chain.link(ts_.cur().pos);
      e = parse_filter_chain(std::move(e), false);
    } else if (ts_.is_name("is")) {
      chain.link(ts_.cur().pos);
      e = parse_test(std::move(e));
    } else if (ts_.is_op("(")) {
      chain.link(ts_.cur().pos);
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr obj) {
  const SourcePos pos = ts_.cur().pos;
  ts_.expect_op("[");
  std::vector<ExprPtr> keys;
  ExprPtr result;
  while (!ts_.is_op("]")) {
    if (!keys.empty()) ts_.expect_op(",");
    keys.push_back(parse_subscribed());
  }
  ts_.expect_op("]");
  if (keys.empty()) ts_.fail(pos, "expected a subscript inside '[]'");
  ExprPtr key;
  if (keys.size() == 1) {
    key = std::move(keys[0]);
  } else {
    auto t = std::make_unique<ListExpr>(ExprKind::kTuple, pos);
    for (auto& k : keys) {
      if (k->kind == ExprKind::kSlice)
        ts_.fail(k->pos, "a slice cannot be part of a tuple subscript");
      t->items.push_back(std::move(k));
    }
    key = std::move(t);
  }
  if (key->kind == ExprKind::kSlice) {
    auto* s = static_cast<SliceExpr*>(key.get());
    s->obj = std::move(obj);
    s->pos = pos;
    return key;
  }
  return std::make_unique<ItemExpr>(pos, std::move(obj), std::move(key));
}

ExprPtr ExpressionParser::parse_subscribed() {
  const SourcePos pos = ts_.cur().pos;
  ExprPtr start;
  if (!ts_.is_op(":")) {
    start = parse_expression(true);
    if (!ts_.is_op(":")) return start;
  }
  ts_.next();  // ':'
  auto s = std::make_unique<SliceExpr>(pos);
  s->start = std::move(start);
  if (!ts_.is_op(":") && !ts_.is_op("]") && !ts_.is_op(",")) s->stop = parse_expression(true);
  if (ts_.skip_op(":")) {
    if (!ts_.is_op("]") && !ts_.is_op(",")) s->step = parse_expression(true);
  }
  return s;
}

ArgList ExpressionParser::parse_args() {
  const SourcePos pos = ts_.cur().pos;
  ts_.expect_op("(");
  ArgList args;
  bool first = true;
  while (!ts_.is_op(")")) {
    if (!first) {
      ts_.expect_op(",");
      if (ts_.is_op(")")) break;
    }
    first = false;
    if (ts_.is_op("*") || ts_.is_op("**"))
      ts_.fail(ts_.cur().pos, "*args and **kwargs are not supported");
    if (ts_.cur().type == TokenType::kName && ts_.look().type == TokenType::kOperator &&
        ts_.look().text == "=") {
      std::string key = ts_.next().text;
      ts_.next();
      args.keyword.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!args.keyword.empty()) {
        ts_.fail(ts_.cur().pos, "positional argument follows keyword argument");
      }
      args.positional.push_back(parse_expression(true));
    }
  }
  (void)pos;
  ts_.expect_op(")");
  return args;
}

ExprPtr ExpressionParser::parse_call(ExprPtr callee) {
  auto c =
      std::make_unique<CallExpr>(callee->kind == ExprKind::kName ? callee->pos : ts_.cur().pos);
  c->callee = std::move(callee);
  c->args = parse_args();
  return c;
}

ExprPtr ExpressionParser::parse_filter_chain(ExprPtr input, bool start_inline) {
  ExprPtr e = std::move(input);
  TokenStream::ChainGuard chain(ts_);
  while (ts_.is_op("|") || start_inline) {
    if (!start_inline) ts_.next();
    start_inline = false;
    const Token& n = ts_.expect_any_name("filter name");
    chain.link(n.pos);
    auto f = std::make_unique<FilterExpr>(n.pos);
    f->name = n.text;
    while (ts_.is_op(".")) {
      ts_.next();
      f->name += "." + ts_.expect_any_name("filter name").text;
    }
    if (!has_filter(f->name)) ts_.fail(n.pos, "no filter named '" + f->name + "'");
    if (ts_.is_op("(")) f->args = parse_args();
    f->input = std::move(e);
    e = std::move(f);
  }
  return e;
}

ExprPtr ExpressionParser::parse_test(ExprPtr input) {
  const SourcePos pos = ts_.cur().pos;
  ts_.next();  // 'is'
  const bool negated = ts_.skip_name("not");
  const Token& n = ts_.expect_any_name("test name");
  auto t = std::make_unique<TestExpr>(n.pos);
  t->name = n.text;
  while (ts_.is_op(".")) {
    ts_.next();
    t->name += "." + ts_.expect_any_name("test name").text;
  }
  if (!has_test(t->name)) ts_.fail(n.pos, "no test named '" + t->name + "'");
  t->input = std::move(input);
  if (ts_.is_op("(")) {
    t->args = parse_args();
  } else {
    const TokenType ct = ts_.cur().type;
    const bool arg_start = ct == TokenType::kName || ct == TokenType::kString ||
                           ct == TokenType::kInteger || ct == TokenType::kFloat || ts_.is_op("(") ||
                           ts_.is_op("[") || ts_.is_op("{");
    if (arg_start && !ts_.is_name("else") && !ts_.is_name("or") && !ts_.is_name("and")) {
      if (ts_.is_name("is")) ts_.fail(ts_.cur().pos, "tests cannot be chained with 'is'");
      TokenStream::ChainGuard chain(ts_);
      ExprPtr arg = parse_primary();
      t->args.positional.push_back(parse_postfix(std::move(arg), chain));
    }
  }
  if (negated) return std::make_unique<UnaryExpr>(pos, UnaryOp::kNot, std::move(t));
  return t;
}

}  // namespace pagellm::jinja
