// Jinja2 lexer: template source -> tokens, with Jinja2's whitespace rules.
//
// Format:
//   text          copied to the output
//   {{ expr }}    an expression to print        -> VAR_BEGIN tokens VAR_END
//   {% stmt %}    a statement                   -> BLOCK_BEGIN tokens BLOCK_END
//   {# text #}    a comment                     (dropped)
//   {% raw %}...{% endraw %}                    the text between, verbatim
// Inside tags: names [A-Za-z_][A-Za-z0-9_]*, integers (decimal with '_'
// separators, 0b/0o/0x), floats (1.5, 1e3, 1.5e-3), strings in '...' or "..."
// with Python escapes (\n \t \\ \' \" \xhh \uhhhh \Uhhhhhhhh \ooo; unknown
// escapes keep their backslash), and the operators
//   + - * / // % ** ~ == != < <= > >= = . : | , ; ( ) [ ] { }
// A tag's end is only recognised outside brackets.
//
// Whitespace, exactly as Jinja2 applies it:
//   * The source's line breaks (\r\n, \r, \n) become \n, and one trailing \n is
//     dropped (keep_trailing_newline off).
//   * '-' after a tag's opening ({%- {{- {#-) strips all whitespace before the
//     tag; '-' before its closing (-%} -}} -#}) strips all whitespace after it.
//   * trim_blocks: the first \n right after %} or #} is removed ('+%}' keeps it).
//   * lstrip_blocks: spaces and tabs from the start of a line up to {% or {# are
//     removed ('{%+' keeps them); {{ is never affected.
// "Whitespace" is Python's (Unicode) definition.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/jinja_error.h"

namespace pagellm::jinja {

enum class TokenType {
  kData,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;  // data, name, decoded string, operator
  int64_t int_value = 0;
  double float_value = 0;
  SourcePos pos;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws PositionedError for an unterminated tag, comment, string or raw block,
// an unexpected character, or unbalanced brackets.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& opts = {});

// A readable description of a token for error messages ("'endfor'", "end of
// statement block", "end of template").
std::string describe(const Token& t);

}  // namespace pagellm::jinja
