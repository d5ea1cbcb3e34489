// Jinja2 parser: tokens (jinja_lexer.h) -> syntax tree (jinja_ast.h).
//
// Grammar (the Jinja2 subset chat templates use; `{%` and `%}` delimit tags):
//   template  := ( DATA | '{{' tuple '}}' | '{%' stmt '%}' )*
//   stmt      := 'if' tuple_nc body ( 'elif' tuple_nc body )* [ 'else' body ] 'endif'
//              | 'for' targets 'in' tuple_nc [ 'if' expr ] [ 'recursive' ] body
//                    [ 'else' body ] 'endfor'
//              | 'set' target '=' tuple
//              | 'set' target ( '|' filter )* body 'endset'
//              | 'macro' NAME '(' [ param ( ',' param )* ] ')' body 'endmacro'
//              | 'filter' filter ( '|' filter )* body 'endfilter'
//              | 'with' [ target '=' expr ( ',' target '=' expr )* ] body 'endwith'
//              | 'print' tuple
//              | 'break' | 'continue'                  (inside a for body)
//              | 'generation' body 'endgeneration'     (Hugging Face's extension)
//   target    := NAME | NAME '.' NAME (set only) | targets
//   targets   := NAME ( ',' NAME )*  | '(' targets ')'
//   param     := NAME [ '=' expr ]
//   tuple     := expr ( ',' expr )* [ ',' ]      (one expr without a comma is itself)
//   tuple_nc  := the same without inline if/else
//   expr      := or ( 'if' or [ 'else' expr ] )*
//   or        := and ( 'or' and )*
//   and       := not ( 'and' not )*
//   not       := 'not' not | compare
//   compare   := math1 ( ( '==' | '!=' | '<' | '<=' | '>' | '>=' | 'in' | 'not' 'in' ) math1 )*
//   math1     := concat ( ( '+' | '-' ) concat )*
//   concat    := math2 ( '~' math2 )*
//   math2     := pow ( ( '*' | '/' | '//' | '%' ) pow )*
//   pow       := unary ( '**' unary )*
//   unary     := ( '-' | '+' ) unary_nf postfix* filters*  |  primary postfix* filters*
//                (unary_nf: the same without filters, so -x|abs is abs(-x))
//   primary   := NAME | 'true' | 'false' | 'none' (any case of the first letter)
//              | STRING+ | INTEGER | FLOAT | '(' [ tuple ] ')' | '[' exprs ']' | '{' pairs '}'
//   postfix   := '.' NAME | '.' INTEGER | '[' subscript ']' | '(' args ')'
//   subscript := expr | [ expr ] ':' [ expr ] [ ':' [ expr ] ]
//   filters   := '|' NAME [ '(' args ')' ] | 'is' [ 'not' ] NAME [ '(' args ')' | primary ]
//              | '(' args ')'
//   args      := [ arg ( ',' arg )* [ ',' ] ]  with arg := expr | NAME '=' expr
//                (positional arguments before keyword ones)
//
// Not supported (a TemplateError names the tag): extends, block, include,
// import, from, call, autoescape, and *args / **kwargs in calls. Unknown filter
// and test names are rejected here, when the template is parsed.
// Nesting is bounded (kMaxParseDepth levels of expressions and of blocks, see
// jinja_token_stream.h), so hostile input cannot exhaust the stack.
#pragma once

#include <string_view>
#include <vector>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_lexer.h"

namespace pagellm::jinja {

// Throws PositionedError.
StmtList parse(std::vector<Token> tokens);

}  // namespace pagellm::jinja
