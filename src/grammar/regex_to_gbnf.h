// JSON Schema `pattern` (a regex subset) as a GBNF expression over the text
// between a JSON string's quotes (grammar/json_schema.h uses it).
//
// Subset: literals, escapes \d \w \s \D \W \S \n \r \t and escaped
// punctuation, classes [...] with ranges and negation, `.`, groups ( ) and
// (?: ) with |, quantifiers * + ? {m} {m,} {m,n}; ^ and $ only at the ends
// (the whole string must match either way). Lookarounds, backreferences,
// anchors inside the pattern and unknown escapes throw RegexError. Control
// characters (\n, \t, ...) cannot stand unescaped in a JSON string, so
// pattern parts that match only them match nothing here.
#pragma once

#include <string>

#include "util/error.h"

namespace pagellm {

// A pattern outside the subset; the message names the construct and offset.
class RegexError : public Error {
 public:
  using Error::Error;
};

// A GBNF expression matching the JSON-escaped contents of the strings that
// `pattern` matches in full.
std::string regex_to_gbnf(const std::string& pattern);

}  // namespace pagellm
