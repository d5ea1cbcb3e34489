#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/regex_to_gbnf.h"
#include "util/strings.h"

namespace pagellm {

namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxOutput = size_t{1} << 20;
constexpr int kMaxDepth = 64;
constexpr int64_t kMaxInt = int64_t{1} << 53;
constexpr double kMaxCount = 10000;

// The shared rules of JSON text.
const char* const kBase = R"G(ws ::= [ \t\n]{0,8}
value ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" char* "\""
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
)G";

// RFC 3339 formats exactly as python's jsonschema checks them (the JSON
// Schema 2020-12 checker, with rfc3339-validator): years 0001-9999, each
// month's days, February 29 only in leap years (divisible by 4, centuries
// by 400); hours 00-23, seconds 00-59 (no leap second: the checker refuses
// 60); the offset required (full-time); `T` and `Z` in either case.
#define PAGELLM_MULT4 "( [02468] [48] | [2468] \"0\" | [13579] [26] )"  // 04..96 by 4
#define PAGELLM_HOUR "( [01] [0-9] | \"2\" [0-3] )"
const char* const kDate =
    "( ( [0-9]{3} [1-9] | [0-9]{2} [1-9] \"0\" | [0-9] [1-9] \"00\" | [1-9] \"000\" ) \"-\" ( "
    "( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
    "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
    "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | "
    "( [0-9]{2} " PAGELLM_MULT4 " | " PAGELLM_MULT4 " \"00\" ) \"-02-29\" )";
const char* const kTime = "( " PAGELLM_HOUR " \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]+ )? "
                          "( [Zz] | [+-] " PAGELLM_HOUR " \":\" [0-5] [0-9] ) )";
#undef PAGELLM_MULT4
#undef PAGELLM_HOUR

// A GBNF literal of the bytes of `s`.
std::string literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (const std::string_view e = whitespace_escape(c); !e.empty()) {
      out += e;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c == 0x7F)
          out += fmt::format("\\x{:02X}", c);
        else
          out.push_back(static_cast<char>(c));
    }
  }
  return out + "\"";
}

// ---- integer ranges as digit patterns (no leading zeros) ----

// Fixed-length digit strings >= s (ge) or <= s (le).
std::string ge_digits(const std::string& s) {
  if (s.empty()) return "\"\"";
  if (s.find_first_not_of('0') == std::string::npos) return fmt::format("[0-9]{{{}}}", s.size());
  const std::string rest = ge_digits(s.substr(1));
  std::string alt = fmt::format("\"{}\" {}", s[0], rest);
  if (s[0] < '9') {
    alt += fmt::format(" | [{}-9]", static_cast<char>(s[0] + 1));
    if (s.size() > 1) alt += fmt::format(" [0-9]{{{}}}", s.size() - 1);
  }
  return "(" + alt + ")";
}

std::string le_digits(const std::string& s) {
  if (s.empty()) return "\"\"";
  if (s.find_first_not_of('9') == std::string::npos) return fmt::format("[0-9]{{{}}}", s.size());
  const std::string rest = le_digits(s.substr(1));
  std::string alt = fmt::format("\"{}\" {}", s[0], rest);
  if (s[0] > '0') {
    alt += fmt::format(" | [0-{}]", static_cast<char>(s[0] - 1));
    if (s.size() > 1) alt += fmt::format(" [0-9]{{{}}}", s.size() - 1);
  }
  return "(" + alt + ")";
}

// Equal-length a <= b, free digits after the first (which may be anything
// here: callers keep leading zeros out).
std::string same_length(const std::string& a, const std::string& b) {
  if (a.size() == 1) return fmt::format("[{}-{}]", a[0], b[0]);
  if (a[0] == b[0]) return fmt::format("\"{}\" {}", a[0], same_length(a.substr(1), b.substr(1)));
  std::string alt = fmt::format("\"{}\" {} | \"{}\" {}", a[0], ge_digits(a.substr(1)), b[0],
                                le_digits(b.substr(1)));
  if (b[0] - a[0] > 1)
    alt += fmt::format(" | [{}-{}] [0-9]{{{}}}", static_cast<char>(a[0] + 1),
                       static_cast<char>(b[0] - 1), a.size() - 1);
  return "(" + alt + ")";
}

// 0 <= lo <= hi, as decimal text without leading zeros.
std::string nonneg_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  const std::string a = std::to_string(lo), b = std::to_string(hi);
  for (size_t n = a.size(); n <= b.size(); ++n) {
    const std::string from = n == a.size() ? a : "1" + std::string(n - 1, '0');
    const std::string to = n == b.size() ? b : std::string(n, '9');
    alts.push_back(same_length(from, to));
  }
  std::string out;
  for (const auto& x : alts) out += (out.empty() ? "" : " | ") + x;
  return "(" + out + ")";
}

std::string int_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) alts.push_back("\"-\" " + nonneg_range(std::max<int64_t>(1, -std::min<int64_t>(hi, -1)), -lo));
  if (hi >= 0) alts.push_back(nonneg_range(std::max<int64_t>(lo, 0), hi));
  std::string out;
  for (const auto& x : alts) out += (out.empty() ? "" : " | ") + x;
  return "(" + out + ")";
}

class Converter {
 public:
  explicit Converter(const json& root, std::string prefix = "") : root_(root), prefix_(std::move(prefix)) {}

  SchemaGrammar fragment() {
    SchemaGrammar g;
    g.expr = visit(root_, "", 0);
    for (const auto& [name, body] : rules_) g.rules += fmt::format("{} ::= {}\n", name, body);
    return g;
  }

  std::string run() {
    const std::string top = visit(root_, "", 0);
    std::string out = fmt::format("root ::= {}\n", top);
    for (const auto& [name, body] : rules_) out += fmt::format("{} ::= {}\n", name, body);
    out += kBase;
    if (out.size() > kMaxOutput)
      throw JsonSchemaError(fmt::format("the schema's grammar is over {} bytes", kMaxOutput), "");
    // A $ref that reaches itself before any character with more to match
    // after it makes a left-recursive grammar: refuse the schema rather than
    // hand back a grammar that does not compile. (Patterns that repeat an
    // empty match and $refs that end where they recurse do compile.)
    try {
      (void)Grammar::parse(out);
    } catch (const GrammarError& e) {
      throw JsonSchemaError(
          fmt::format("the schema cannot be matched left to right ({}): a $ref reaches itself "
                      "before any character with more to match after it",
                      e.what()),
          "");
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& path) const {
    throw JsonSchemaError(fmt::format("{} at {}", what, path.empty() ? "/" : path), path);
  }

  // A new rule holding `body`; returns its name.
  std::string add_rule(const std::string& hint, const std::string& body) {
    std::string name = fmt::format("{}{}-{}", prefix_, hint, rules_.size());
    rules_.emplace_back(name, body);
    size_ += name.size() + body.size();
    if (size_ > kMaxOutput)
      throw JsonSchemaError(fmt::format("the schema's grammar is over {} bytes", kMaxOutput), "");
    return name;
  }

  // An integer bound from a number: rounded up for lower bounds, down for
  // upper ones (minimum 2.5 admits 3, not 2).
  int64_t int_of(const json& v, const char* key, const std::string& path, bool lower) const {
    if (!v.is_number()) fail(fmt::format("'{}' must be a number", key), path);
    const double d = lower ? std::ceil(v.get<double>()) : std::floor(v.get<double>());
    if (!(d > -static_cast<double>(kMaxInt) && d < static_cast<double>(kMaxInt)))
      fail(fmt::format("'{}' is out of range (|x| < 2^53)", key), path);
    return static_cast<int64_t>(d);
  }

  // A length or count; maxima over kMaxCount are no bound (a grammar of that
  // many repetitions would be huge, and replies never get there).
  int64_t count_of(const json& s, const char* key, const std::string& path, int64_t def,
                   bool maximum = false) const {
    if (!s.contains(key)) return def;
    const json& v = s[key];
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() != std::floor(v.get<double>()))
      fail(fmt::format("'{}' must be a non-negative integer", key), path);
    const double d = v.get<double>();
    if (d > kMaxCount) {
      if (maximum) return -1;
      fail(fmt::format("'{}' over {} is not supported", key, kMaxCount), path);
    }
    return static_cast<int64_t>(d);
  }

  std::string visit(const json& s, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail("the schema nests too deeply", path);
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("a 'false' schema allows nothing", path);
      return "value";
    }
    if (!s.is_object()) fail("a schema must be an object or a boolean", path);
    static const std::set<std::string> kKnown = {
        "type", "properties", "required", "additionalProperties", "enum", "const", "items",
        "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
        "$ref", "$defs", "definitions", "nullable", "title", "description", "default", "examples",
        "$schema", "$id", "$comment", "strict", "deprecated", "readOnly", "writeOnly"};
    for (const auto& [k, v] : s.items())
      if (!kKnown.count(k)) fail(fmt::format("unsupported JSON Schema keyword '{}'", k), path);
    std::string e = visit_core(s, path, depth);
    if (s.contains("nullable")) {
      if (!s["nullable"].is_boolean()) fail("'nullable' must be a boolean", path);
      if (s["nullable"].get<bool>()) e = "( " + e + " | \"null\" )";
    }
    return e;
  }

  std::string visit_core(const json& s, const std::string& path, int depth) {
    if (s.contains("$ref")) return ref(s["$ref"], path, depth);
    if (s.contains("const")) return literal(s["const"].dump());
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) fail("'enum' must be a non-empty array", path);
      std::string out;
      for (const auto& v : e) out += (out.empty() ? "" : " | ") + literal(v.dump());
      return "( " + out + " )";
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) {
        const json& a = s[key];
        if (!a.is_array() || a.empty()) fail(fmt::format("'{}' must be a non-empty array", key), path);
        std::string out;
        for (size_t i = 0; i < a.size(); ++i)
          out += (out.empty() ? "" : " | ") +
                 visit(a[i], fmt::format("{}/{}/{}", path, key, i), depth + 1);
        return "( " + out + " )";
      }
    if (s.contains("allOf")) {
      const json& a = s["allOf"];
      if (!a.is_array() || a.size() != 1)
        fail("'allOf' is supported with exactly one schema", path);
      return visit(a[0], path + "/allOf/0", depth + 1);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string()) fail("'type' must be a string or an array of strings", path);
          types.push_back(x.get<std::string>());
        }
      } else {
        fail("'type' must be a string or an array of strings", path);
      }
    } else if (s.contains("properties") || s.contains("additionalProperties")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems")) {
      types.push_back("array");
    } else if (s.contains("pattern") || s.contains("minLength") || s.contains("maxLength")) {
      types.push_back("string");
    } else {
      return "value";
    }
    std::string out;
    for (const auto& t : types) out += (out.empty() ? "" : " | ") + typed(s, t, path, depth);
    return types.size() == 1 ? out : "( " + out + " )";
  }

  std::string typed(const json& s, const std::string& t, const std::string& path, int depth) {
    if (t == "null") return "null";
    if (t == "boolean") return "boolean";
    if (t == "string") return string_rule(s, path);
    if (t == "integer") return integer_rule(s, path);
    if (t == "number") {
      const bool nonneg = (s.contains("minimum") && s["minimum"].is_number() &&
                           s["minimum"].get<double>() >= 0) ||
                          (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() &&
                           s["exclusiveMinimum"].get<double>() >= 0);
      return nonneg ? "( (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? )"
                    : "number";
    }
    if (t == "object") return object_rule(s, path, depth);
    if (t == "array") return array_rule(s, path, depth);
    fail(fmt::format("unknown type '{}'", t), path);
  }

  std::string integer_rule(const json& s, const std::string& path) {
    bool has_lo = false, has_hi = false;
    int64_t lo = -(kMaxInt - 1), hi = kMaxInt - 1;
    if (s.contains("minimum")) has_lo = true, lo = int_of(s["minimum"], "minimum", path, true);
    if (s.contains("exclusiveMinimum")) {
      // The least integer above x: floor(x) + 1.
      has_lo = true;
      lo = std::max(lo, int_of(s["exclusiveMinimum"], "exclusiveMinimum", path, false) + 1);
    }
    if (s.contains("maximum")) has_hi = true, hi = int_of(s["maximum"], "maximum", path, false);
    if (s.contains("exclusiveMaximum")) {
      has_hi = true;
      hi = std::min(hi, int_of(s["exclusiveMaximum"], "exclusiveMaximum", path, true) - 1);
    }
    if (!has_lo && !has_hi) return "integer";
    if (lo > hi) fail("the integer range is empty", path);
    return add_rule("int", int_range(lo, hi));
  }

  std::string string_rule(const json& s, const std::string& path) {
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) fail("'pattern' must be a string", path);
      try {
        return add_rule("pattern", "\"\\\"\" " + regex_to_gbnf(s["pattern"].get<std::string>()) +
                                       " \"\\\"\"");
      } catch (const RegexError& e) {
        fail(fmt::format("unsupported 'pattern': {}", e.what()), path);
      }
    }
    if (s.contains("format") && s["format"].is_string()) {
      const std::string f = s["format"].get<std::string>();
      if (f == "date") return add_rule("date", fmt::format("\"\\\"\" {} \"\\\"\"", kDate));
      if (f == "time") return add_rule("time", fmt::format("\"\\\"\" {} \"\\\"\"", kTime));
      if (f == "date-time")
        return add_rule("datetime", fmt::format("\"\\\"\" {} [Tt] {} \"\\\"\"", kDate, kTime));
      if (f == "uuid")
        return add_rule("uuid",
                        "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                        "[0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\"");
    }
    const int64_t lo = count_of(s, "minLength", path, 0),
                  hi = count_of(s, "maxLength", path, -1, true);
    if (hi >= 0 && hi < lo) fail("'maxLength' is below 'minLength'", path);
    if (lo == 0 && hi < 0) return "string";
    return add_rule("str", hi < 0 ? fmt::format("\"\\\"\" char{{{},}} \"\\\"\"", lo)
                                  : fmt::format("\"\\\"\" char{{{},{}}} \"\\\"\"", lo, hi));
  }

  std::string object_rule(const json& s, const std::string& path, int depth) {
    const json props = s.contains("properties") ? s["properties"] : json::object();
    if (!props.is_object()) fail("'properties' must be an object", path);
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail("'required' must be an array of names", path);
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail("'required' must be an array of names", path);
        required.insert(r.get<std::string>());
      }
    }
    // Extra keys: their value's grammar, or empty when not allowed.
    std::string extra;
    const json ap = s.contains("additionalProperties") ? s["additionalProperties"]
                                                          : json(props.empty());
    if (ap.is_boolean()) {
      if (ap.get<bool>()) extra = "value";
    } else if (ap.is_object()) {
      extra = visit(ap, path + "/additionalProperties", depth + 1);
    } else {
      fail("'additionalProperties' must be a boolean or a schema", path);
    }
    if (props.empty() && extra == "value") return "object";
    std::vector<std::pair<std::string, bool>> items;  // key-value rule, required
    for (const auto& [k, v] : props.items())
      items.emplace_back(add_rule("kv", fmt::format("{} ws \":\" ws {}", literal(json(k).dump()),
                                                   visit(v, path + "/properties/" + k, depth + 1))),
                         required.count(k) > 0);
    for (const auto& r : required)
      if (!props.contains(r)) fail(fmt::format("'required' names '{}', which is not in 'properties'", r), path);
    const std::string extra_kv =
        extra.empty() ? "" : add_rule("kv", fmt::format("string ws \":\" ws {}", extra));
    // tail_i: what follows once something was written, from item i on;
    // start_i: the first item written from i on (or nothing).
    const size_t n = items.size();
    std::string tail = extra_kv.empty() ? "\"\"" : add_rule("more", fmt::format("( \",\" ws {} ws )*", extra_kv));
    std::string start = extra_kv.empty() ? "\"\"" : add_rule("first", fmt::format("( {} ws {} )?", extra_kv, tail));
    for (size_t i = n; i-- > 0;) {
      const auto& [kv, req] = items[i];
      const std::string new_tail =
          add_rule("tail", req ? fmt::format("\",\" ws {} ws {}", kv, tail)
                               : fmt::format("( \",\" ws {} ws )? {}", kv, tail));
      start = add_rule("start", req ? fmt::format("{} ws {}", kv, tail)
                                    : fmt::format("{} ws {} | {}", kv, tail, start));
      tail = new_tail;
    }
    return add_rule("obj", fmt::format("\"{{\" ws {} \"}}\"", start));
  }

  std::string array_rule(const json& s, const std::string& path, int depth) {
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail("'prefixItems' must be an array", path);
      for (size_t i = 0; i < s["prefixItems"].size(); ++i)
        prefix.push_back(visit(s["prefixItems"][i], fmt::format("{}/prefixItems/{}", path, i), depth + 1));
    }
    std::string item = "value";
    bool more = true;
    if (s.contains("items")) {
      if (s["items"].is_boolean() && !s["items"].get<bool>())
        more = false;
      else
        item = visit(s["items"], path + "/items", depth + 1);
    }
    const int64_t lo = count_of(s, "minItems", path, 0),
                  hi = count_of(s, "maxItems", path, -1, true);
    if (hi >= 0 && hi < lo) fail("'maxItems' is below 'minItems'", path);
    if (hi >= 0 && static_cast<int64_t>(prefix.size()) > hi) prefix.resize(static_cast<size_t>(hi));
    const int64_t np = static_cast<int64_t>(prefix.size());
    // The elements in order: the prefix's (each required up to lo, else
    // optional in turn), then items between.
    std::string seq;
    const int64_t first_items = std::max<int64_t>(0, lo - np);
    const int64_t max_items = !more ? 0 : hi < 0 ? -1 : std::max<int64_t>(0, hi - np);
    if (max_items >= 0 && max_items < first_items) fail("'minItems' exceeds what the items allow", path);
    std::vector<std::string> elems = prefix;
    const std::string it = add_rule("item", item);
    for (int64_t k = 0; k < first_items; ++k) elems.push_back(it);
    const int64_t required_count = std::max<int64_t>(lo, std::min<int64_t>(np, lo));
    // Build from the end: rest after element j.
    std::string rest;
    if (max_items < 0)
      rest = fmt::format("( \",\" ws {} ws )*", it);
    else if (max_items > first_items)
      rest = fmt::format("( \",\" ws {} ws ){{0,{}}}", it, max_items - first_items);
    else
      rest = "\"\"";
    rest = add_rule("items", rest);
    for (size_t j = elems.size(); j-- > 0;) {
      const bool req = static_cast<int64_t>(j) < required_count;
      const std::string piece = j == 0 ? fmt::format("{} ws {}", elems[j], rest)
                                       : fmt::format("\",\" ws {} ws {}", elems[j], rest);
      rest = add_rule("el", req ? piece : fmt::format("( {} )?", piece));
    }
    if (elems.empty()) {  // no prefix and no required items: optional first item
      const std::string tail = max_items < 0  ? fmt::format("( \",\" ws {} ws )*", it)
                               : max_items > 1 ? fmt::format("( \",\" ws {} ws ){{0,{}}}", it, max_items - 1)
                                               : "\"\"";
      rest = max_items == 0 ? "\"\"" : add_rule("el", fmt::format("( {} ws {} )?", it, tail));
    }
    seq = rest;
    return add_rule("arr", fmt::format("\"[\" ws {} \"]\"", seq));
  }

  std::string ref(const json& r, const std::string& path, int depth) {
    if (!r.is_string()) fail("'$ref' must be a string", path);
    const std::string target = r.get<std::string>();
    if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.rfind("#", 0) != 0)
      fail(fmt::format("'$ref' '{}' is not local (only #/... is supported)", target), path);
    const json* node = &root_;
    try {
      node = &root_.at(json::json_pointer(target.substr(1)));
    } catch (const json::exception&) {
      fail(fmt::format("'$ref' '{}' points nowhere", target), path);
    }
    // Reserve the rule first: a recursive schema refers to itself.
    const std::string name = fmt::format("{}ref-{}", prefix_, refs_.size());
    refs_[target] = name;
    const size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    const std::string body = visit(*node, target.substr(1), depth + 1);
    rules_[slot].second = body;
    return name;
  }

  const json& root_;
  std::string prefix_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;
  size_t size_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  return Converter(schema).run();
}

std::string json_object_gbnf() {
  return std::string("root ::= object\n") + kBase;
}

SchemaGrammar json_schema_fragment(const nlohmann::ordered_json& schema, const std::string& prefix) {
  return Converter(schema, prefix).fragment();
}

std::string json_base_gbnf() {
  return kBase;
}

}  // namespace pagellm
