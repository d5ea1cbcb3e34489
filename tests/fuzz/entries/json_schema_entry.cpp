// A JSON Schema (JSON text): converted to GBNF or refused with a
// JsonSchemaError; what the converter produces must always compile, and a
// matcher over it must run on a few bytes of JSON.
#include <string>

#include <nlohmann/json.hpp>

#include "entries/fuzz_entries.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "util/error.h"

namespace pagellm::fuzz {

int json_schema(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  std::string gbnf;
  try {
    gbnf = json_schema_to_gbnf(schema);
  } catch (const JsonSchemaError&) {
    return 0;
  }
  std::shared_ptr<const Grammar> g;
  try {
    g = Grammar::parse(gbnf);
  } catch (const GrammarError& e) {
    // Too large a grammar is a fair refusal; a syntax error is the converter's bug.
    if (std::string(e.what()).find("more than") == std::string::npos)
      violated("the converter wrote a grammar that does not compile");
    return 0;
  }
  GrammarMatcher m(g);
  for (char c : std::string("{\"a\": [1, \"x\", null]}")) {
    if (m.arena_size() > 100000 || !m.advance(static_cast<uint8_t>(c))) break;
  }
  return 0;
}

}  // namespace pagellm::fuzz
