// JSON Schema to GBNF (grammar/grammar.h): the grammar's root matches JSON
// texts valid under the schema, so constrained decoding can only produce
// those.
//
// Supported: type (one or a list; "integer", "number", "string", "boolean",
// "null", "object", "array"), properties / required / additionalProperties,
// enum / const, items / prefixItems / minItems / maxItems, minLength /
// maxLength / pattern (a regex subset: literals, escapes \d \w \s \D \W \S
// and escaped punctuation, classes [...] with ranges and negation, `.`,
// groups with |, quantifiers * + ? {m} {m,} {m,n}; ^ and $ at the ends),
// format (date, time, date-time: exact RFC 3339 as python's jsonschema checks
// them, days per month and leap years included; uuid; others are plain strings),
// minimum / maximum / exclusiveMinimum / exclusiveMaximum (exact for
// integers; for numbers only the sign is enforced, from minimum >= 0),
// anyOf / oneOf (alternatives), allOf of one schema, $ref to "#/..." (e.g.
// #/$defs/x; recursive schemas become recursive rules), nullable (OpenAPI).
// Ignored: title, description, default, examples, $schema, $id, $comment,
// strict, deprecated, readOnly, writeOnly. Anything else is refused.
//
// Choices where JSON Schema leaves room, as OpenAI's strict mode does:
// properties come in their declared order; with `properties`, extra keys
// are allowed only when additionalProperties is true or a schema (and then
// an extra key may repeat a declared one: not checked). Strings
// with a pattern hold only unescaped characters besides \" and \\. Whitespace
// between tokens: at most a short run (see kWs in the .cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "util/error.h"

namespace pagellm {

// A schema the converter refuses; path() is the JSON pointer of the part.
class JsonSchemaError : public Error {
 public:
  JsonSchemaError(const std::string& msg, std::string path) : Error(msg), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// GBNF whose root matches the JSON texts valid under `schema`. Throws
// JsonSchemaError naming the keyword and where it is.
// Properties keep the order they have in `schema` (ordered_json: parse the
// client's text with nlohmann::ordered_json::parse).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// GBNF of any JSON object (response_format json_object).
std::string json_object_gbnf();

// For composing grammars (tool calls): the schema as an expression `expr`
// over `rules` (rule names start with `prefix`), both without the shared
// JSON rules of json_base_gbnf(); no left-recursion check (parse the whole).
struct SchemaGrammar {
  std::string expr;
  std::string rules;
};
SchemaGrammar json_schema_fragment(const nlohmann::ordered_json& schema, const std::string& prefix);
// The shared rules (ws, value, object, array, string, number, integer, ...).
std::string json_base_gbnf();

}  // namespace pagellm
