// Small readers shared by the API request parsers (Chat Completions,
// Responses, Anthropic Messages), for nlohmann::json and ordered_json alike.
#pragma once

#include <nlohmann/json.hpp>

namespace pagellm {

// What a JSON value is, for error messages: "a string", "an array", "null" ...
template <class Json>
const char* json_kind(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::number_float:
      return "a number";
    default:
      return "an integer";
  }
}

// obj[key] when present and not null, else nullptr.
template <class Json>
const Json* json_field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace pagellm
