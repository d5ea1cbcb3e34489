// The expression half of the Jinja parser (the grammar is in jinja_parser.h):
//   tuple     := expr ( ',' expr )* [ ',' ]
//   expr      := or ( 'if' or [ 'else' expr ] )*
//   or / and / not / compare / math1 / concat / math2 / pow / unary
//   unary     := ( '-' | '+' ) unary_nf postfix* filters* | primary postfix* filters*
//   primary   := NAME | constant | STRING+ | INTEGER | FLOAT | '(' tuple ')' | list | dict
//   postfix   := '.' NAME | '.' INTEGER | '[' subscript ']' | '(' args ')'
//   filters   := '|' NAME [ '(' args ')' ] | 'is' [ 'not' ] NAME [ args | primary ] | '(' args ')'
// Filter and test names are checked against the built-ins as they are read.
#pragma once

#include <initializer_list>
#include <string_view>
#include <utility>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_token_stream.h"

namespace pagellm::jinja {

class ExpressionParser {
 public:
  explicit ExpressionParser(TokenStream& ts) : ts_(ts) {}

  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                      bool explicit_parens);
  ExprPtr parse_expression(bool with_condexpr);
  // '|' name [args] ('|' name [args])*, or without the first '|' (filter blocks).
  ExprPtr parse_filter_chain(ExprPtr input, bool start_inline);

 private:
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const;
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_binary_chain(ExprPtr (ExpressionParser::*next_level)(),
                             std::initializer_list<std::pair<const char*, BinaryOp>> ops);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary_f();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e, TokenStream::ChainGuard& chain);
  ExprPtr parse_filter_expr(ExprPtr e, TokenStream::ChainGuard& chain);
  ExprPtr parse_subscript(ExprPtr obj);
  // One subscript: an expression or a slice (whose obj the caller fills in).
  ExprPtr parse_subscribed();
  ArgList parse_args();
  // A call is placed at its callee when that is a plain name (`f(...)`), else
  // at the '('.
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_test(ExprPtr input);

  TokenStream& ts_;
};

}  // namespace pagellm::jinja
