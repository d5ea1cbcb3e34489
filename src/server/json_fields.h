// Small readers shared by the API request parsers (Chat Completions,
// Responses, Anthropic Messages), for nlohmann::json and ordered_json alike.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/api_error.h"

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

// A request body: a JSON object, else ApiError 400 ("invalid_json" when it
// does not parse: a syntax error, or a number out of range such as 1e999).
template <class Json>
Json parse_request_body(const std::string& text) {
  Json body;
  try {
    body = Json::parse(text);
  } catch (const typename Json::exception& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()),
                   "invalid_request_error", "", "invalid_json");
  }
  if (!body.is_object())
    throw ApiError(400,
                   fmt::format("the request body must be a JSON object, not {}", json_kind(body)));
  return body;
}

// An array of token ids as sent; ApiError 400 naming `param` for an element
// that is not an integer. Ids past int64 are clamped (checked_token_ids
// refuses them with the vocabulary's range).
template <class Json>
std::vector<int64_t> json_token_ids(const Json& arr, const std::string& param) {
  std::vector<int64_t> ids;
  ids.reserve(arr.size());
  for (const Json& t : arr) {
    if (!t.is_number_integer())
      throw ApiError(400,
                     fmt::format("'{}' must hold only integers (token ids), found {}", param,
                                 json_kind(t)),
                     "invalid_request_error", param);
    ids.push_back(t.is_number_unsigned()
                      ? static_cast<int64_t>(std::min<uint64_t>(
                            t.template get<uint64_t>(), std::numeric_limits<int64_t>::max()))
                      : t.template get<int64_t>());
  }
  return ids;
}

}  // namespace pagellm
