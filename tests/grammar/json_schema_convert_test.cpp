// JSON Schemas as grammars: texts valid under each schema are accepted and
// invalid ones refused (checked by hand-written cases and, for integer
// bounds, every value of a range); refusals name the keyword.
#include <gtest/gtest.h>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"

namespace pagellm {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<const Grammar> of(const json& schema) {
  const std::string gbnf = json_schema_to_gbnf(schema);
  try {
    return Grammar::parse(gbnf);
  } catch (const GrammarError& e) {
    ADD_FAILURE() << e.what() << "\n" << gbnf;
    throw;
  }
}

void expect(const json& schema, std::vector<std::string> good, std::vector<std::string> bad) {
  const auto g = of(schema);
  for (const auto& t : good) EXPECT_TRUE(grammar_accepts(g, t)) << schema.dump() << " should take " << t;
  for (const auto& t : bad) EXPECT_FALSE(grammar_accepts(g, t)) << schema.dump() << " should refuse " << t;
}

TEST(JsonSchema, IntegerBoundsAreExact) {
  for (auto [lo, hi] : std::vector<std::pair<int, int>>{{3, 117}, {-15, 7}, {-120, -30}, {0, 0}, {99, 1000}}) {
    const auto g = of({{"type", "integer"}, {"minimum", lo}, {"maximum", hi}});
    for (int v = -200; v <= 1200; ++v)
      ASSERT_EQ(grammar_accepts(g, std::to_string(v)), v >= lo && v <= hi) << lo << ".." << hi << ": " << v;
    EXPECT_FALSE(grammar_accepts(g, "0" + std::to_string(std::max(lo, 1))));
    EXPECT_FALSE(grammar_accepts(g, "-0"));
  }
  const auto open = of({{"type", "integer"}, {"exclusiveMinimum", 9}});
  for (int v = -20; v <= 2000; ++v) ASSERT_EQ(grammar_accepts(open, std::to_string(v)), v > 9) << v;
  expect({{"type", "integer"}}, {"0", "-12", "123456789"}, {"01", "1.5", "+1", ""});
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  const json s = {{"type", "object"},
                  {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "string"}}},
                                  {"c", {{"type", "boolean"}}}}},
                  {"required", {"b"}}};
  expect(s, {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"a": 1, "b": "x", "c": true})",
             R"({ "b":"", "c":false })"},
         {"{}", R"({"a":1})", R"({"b":"x","a":1})", R"({"b":"x","d":1})", R"({"b":1})",
          R"({"a":1,,"b":"x"})"});
  expect({{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}},
          {"additionalProperties", true}},
         {R"({"a":1,"z":[1,2]})", "{}", R"({"z":null})"}, {R"({"a":1 "z":2})", R"({"a":"x",})"});
  expect({{"type", "object"}}, {"{}", R"({"k":{"n":[1,{"m":"v"}]}})"}, {"[]", "1"});
}

TEST(JsonSchema, EnumsConstsAndTypeLists) {
  expect({{"enum", {"red", 2, nullptr, json::array({1})}}}, {"\"red\"", "2", "null", "[1]"},
         {"\"blue\"", "3", "[1,2]"});
  expect({{"const", "x\"y"}}, {R"("x\"y")"}, {"\"x\"", "\"xy\""});
  expect({{"type", {"string", "null"}}, {"maxLength", 3}}, {"null", "\"abc\"", "\"\""},
         {"\"abcd\"", "1"});
  expect({{"type", "string"}, {"nullable", true}}, {"null", "\"q\""}, {"1"});
  expect({{"anyOf", {{{"type", "integer"}}, {{"type", "boolean"}}}}}, {"1", "true"}, {"\"1\""});
}

TEST(JsonSchema, StringsLengthsEscapesFormatsAndPatterns) {
  expect({{"type", "string"}, {"minLength", 2}, {"maxLength", 4}},
         {"\"ab\"", "\"a\\nb\"", "\"\\u00e9\\u00e9\"", "\"\xc3\xa9\xc3\xa9\xc3\xa9\""},
         {"\"a\"", "\"abcde\"", "\"a\x01\"", "\"a\\q\""});
  expect({{"type", "string"}, {"pattern", "^[a-z]+-\\d{2,3}$"}},
         {"\"abc-12\"", "\"x-123\""}, {"\"abc-1\"", "\"ABC-12\"", "\"abc-1234\"", "\"-12\""});
  expect({{"type", "string"}, {"pattern", "(cat|dog)s?"}}, {"\"cat\"", "\"dogs\""}, {"\"cow\""});
  expect({{"type", "string"}, {"pattern", "[^\"]{1,2}\\\"?"}}, {"\"ab\"", "\"a\\\"\""}, {"\"\"\""});
  expect({{"type", "string"}, {"format", "date"}}, {"\"2024-02-29\""}, {"\"2024-2-29\""});
  expect({{"type", "string"}, {"format", "uuid"}},
         {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567\""});
}

TEST(JsonSchema, ArraysWithBoundsAndPrefixItems) {
  expect({{"type", "array"}, {"items", {{"type", "integer"}}}, {"minItems", 1}, {"maxItems", 3}},
         {"[1]", "[1,2]", "[1, 2, 3]"}, {"[]", "[1,2,3,4]", "[\"a\"]"});
  expect({{"type", "array"}, {"items", {{"type", "string"}}}}, {"[]", R"(["a","b"])"}, {"[1]"});
  expect({{"type", "array"},
          {"prefixItems", {{{"type", "integer"}}, {{"type", "string"}}}},
          {"items", false}},
         {"[]", "[1]", R"([1,"a"])"}, {R"([1,"a",2])", R"(["a"])"});
  expect({{"type", "array"}, {"maxItems", 0}}, {"[]"}, {"[1]"});
}

TEST(JsonSchema, RefsAndRecursion) {
  const json tree = {{"$defs",
                      {{"node",
                        {{"type", "object"},
                         {"properties", {{"v", {{"type", "integer"}}},
                                         {"kids", {{"type", "array"}, {"items", {{"$ref", "#/$defs/node"}}}}}}},
                         {"required", {"v"}}}}}},
                     {"$ref", "#/$defs/node"}};
  expect(tree, {R"({"v":1})", R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"},
         {R"({"kids":[]})", R"({"v":1,"kids":[{"w":2}]})"});
}

TEST(JsonSchema, NestedSchemaOfTheServerTest) {
  const json s = json::parse(R"({"type":"object","properties":{
    "name":{"type":"string","minLength":1,"maxLength":20},
    "age":{"type":"integer","minimum":0,"maximum":120},
    "mood":{"enum":["happy","sad","calm"]},
    "tags":{"type":"array","items":{"type":"string","maxLength":10},"minItems":1,"maxItems":3},
    "pet":{"type":"object","properties":{"kind":{"type":"string","enum":["cat","dog"]},
      "legs":{"type":"integer","minimum":0,"maximum":4}},"required":["kind","legs"],
      "additionalProperties":false},
    "note":{"type":["string","null"],"maxLength":30}},
    "required":["name","age","mood","tags","pet","note"],"additionalProperties":false})");
  expect(s,
         {R"({"name":"Ann","age":31,"mood":"calm","tags":["a"],"pet":{"kind":"cat","legs":4},"note":null})"},
         {R"({"name":"Ann","age":121,"mood":"calm","tags":["a"],"pet":{"kind":"cat","legs":4},"note":null})",
          R"({"name":"Ann","age":31,"mood":"calm","tags":[],"pet":{"kind":"cat","legs":4},"note":null})",
          R"({"name":"Ann","age":31,"mood":"calm","tags":["a"],"pet":{"kind":"cow","legs":4},"note":null})"});
}

// Fractional bounds round inward, prefixItems respect maxItems, large
// maxima are no bound, and schemas whose grammar would be left-recursive are
// refused (never a grammar that does not compile).
TEST(JsonSchema, EdgeCasesFromReview) {
  const auto g = of({{"type", "integer"}, {"minimum", 2.5}, {"exclusiveMaximum", 5.5}});
  for (int v = 0; v <= 7; ++v) EXPECT_EQ(grammar_accepts(g, std::to_string(v)), v >= 3 && v <= 5) << v;
  const auto neg = of({{"type", "integer"}, {"maximum", -2.5}, {"exclusiveMinimum", -6.5}});
  for (int v = -8; v <= 0; ++v) EXPECT_EQ(grammar_accepts(neg, std::to_string(v)), v >= -6 && v <= -3) << v;
  expect({{"type", "array"}, {"prefixItems", {json::object(), json::object(), json::object()}}, {"maxItems", 2}},
         {"[1,2]", "[]"}, {"[1,2,3]"});
  expect({{"type", "string"}, {"maxLength", 65535}}, {"\"abc\""}, {"1"});
  expect({{"type", "string"}, {"minLength", 2.0}}, {"\"ab\""}, {"\"a\""});
  auto refused = [](const json& s) {
    try {
      json_schema_to_gbnf(s);
    } catch (const JsonSchemaError&) {
      return true;
    }
    return false;
  };
  // Stars of nullable items and recursion by tail references compile (the
  // matcher's stacks do not grow on them) and match what they should.
  expect({{"type", "string"}, {"pattern", "^(a*)*$"}}, {"\"\"", "\"aaa\""}, {"\"ab\""});
  expect({{"type", "string"}, {"pattern", "^()*$"}}, {"\"\""}, {"\"a\""});
  expect(json::parse(R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})"),
         {"null"}, {"1"});
  // A schema that is only a reference to itself describes no value.
  bool self_refused = refused({{"$ref", "#"}});
  if (!self_refused) EXPECT_TRUE(GrammarMatcher(Grammar::parse(json_schema_to_gbnf({{"$ref", "#"}}))).dead());
  EXPECT_TRUE(refused({{"type", "string"}, {"nullable", 1}}));
  expect({{"type", "string"}, {"format", "uuid"}}, {"\"123E4567-E89B-12D3-A456-426614174000\""}, {});
}

TEST(JsonSchema, RefusalsNameTheKeyword) {
  auto error = [](const json& s) -> std::string {
    try {
      json_schema_to_gbnf(s);
    } catch (const JsonSchemaError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error({{"type", "object"}, {"patternProperties", json::object()}}).find("'patternProperties'"), std::string::npos);
  EXPECT_NE(error({{"$ref", "#/$defs/none"}}).find("points nowhere"), std::string::npos);
  EXPECT_NE(error({{"$ref", "http://x/y"}}).find("not local"), std::string::npos);
  EXPECT_NE(error({{"type", "string"}, {"pattern", "(?=a)b"}}).find("lookaround"), std::string::npos);
  EXPECT_NE(error({{"type", "string"}, {"pattern", "(a)\\1"}}).find("backreference"), std::string::npos);
  EXPECT_NE(error({{"type", "integer"}, {"minimum", 5}, {"maximum", 1}}).find("empty"), std::string::npos);
  EXPECT_NE(error({{"type", "wat"}}).find("unknown type"), std::string::npos);
  EXPECT_NE(error({{"properties", {{"a", {{"if", true}}}}}}).find("/properties/a"), std::string::npos);
  EXPECT_NE(error(json(false)).find("allows nothing"), std::string::npos);
}

TEST(JsonSchema, AnyJsonObject) {
  const auto g = Grammar::parse(json_object_gbnf());
  for (const char* good : {"{}", R"({"a":[1,-1.5e+10,{"b":"\u00e9\n"}],"c":null})"})
    EXPECT_TRUE(grammar_accepts(g, good)) << good;
  for (const char* bad : {"[]", "1", "\"x\"", "{", R"({"a":})"}) EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
}

}  // namespace
}  // namespace pagellm
