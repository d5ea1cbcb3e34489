// Small text helpers shared by the layers that parse or build text (tokenizer,
// grammar, Jinja, device and plan specs).
#pragma once

#include <string>
#include <string_view>

namespace pagellm {

// Appends the UTF-8 form of `cp` (a Unicode scalar value; surrogates and
// values past U+10FFFF are encoded by the same bit pattern, unchecked).
void utf8_append(char32_t cp, std::string& out);

// `s` without leading and trailing white space (std::isspace, "C" locale); a
// copy, so a temporary may be passed.
std::string trim(std::string_view s);

// The two-character escape (backslash, then n, r or t) of a newline, carriage
// return or tab, else empty: the escapes by name every text form written here
// shares (JSON strings, GBNF literals, the tokenize listing); each escapes
// other characters its own way.
std::string_view whitespace_escape(char32_t c);

}  // namespace pagellm
