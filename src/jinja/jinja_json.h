// JSON in and out of Jinja values.
//
// from_json: JSON (nlohmann, insertion-ordered) -> Value: objects -> dict (key
// order kept), arrays -> list, integers -> int (unsigned above INT64_MAX ->
// float), floats -> float, null -> None.
//
// to_json: Python's json.dumps, as Hugging Face's `tojson` filter calls it
// (ensure_ascii=False by default; keys in insertion order unless sort_keys):
//   separators ", " and ": " without indent, "," and ": " with one; indent (a
//   count of spaces, or a string) puts each item on its own line; floats as
//   repr() ("1.0", "1e-05", NaN, Infinity); strings escape \" \\ \n \r \t \b \f
//   and other control characters as \u00XX (and non-ASCII as \uXXXX, surrogate
//   pairs above U+FFFF, when ensure_ascii). Tuples are arrays; dict keys that are
//   numbers, bools or None become strings as Python writes them. Undefined and
//   objects throw ValueError("Object of type X is not JSON serializable").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "jinja/jinja_value.h"

namespace pagellm::jinja {

// Throws ValueError for JSON nested deeper than kMaxValueDepth.
Value from_json(const nlohmann::ordered_json& j);

struct JsonOptions {
  std::optional<std::string> indent;  // nullopt: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::optional<std::string> item_separator;  // default ", " (one line) or ","
  std::optional<std::string> key_separator;   // default ": "
  size_t max_bytes = SIZE_MAX;                // longer output throws ValueError
};

std::string to_json(const Value& v, const JsonOptions& opts = {});

}  // namespace pagellm::jinja
