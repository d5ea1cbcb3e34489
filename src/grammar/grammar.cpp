#include "grammar/grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "grammar/utf8_ranges.h"
#include "util/strings.h"

namespace pagellm {

namespace {

constexpr size_t kMaxText = size_t{1} << 20;
constexpr size_t kMaxElements = 200000;
constexpr int kMaxRepeat = 10000;
constexpr int kMaxNesting = 256;

// The parsed form, before compiling: alternatives of sequences of items.
struct Expr;
struct Atom {
  enum Kind { kLiteral, kClass, kRuleRef, kGroup } kind = kLiteral;
  std::string literal;                          // kLiteral: UTF-8 bytes
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // kClass: code point ranges
  bool negated = false;                         // kClass
  std::string name;                             // kRuleRef
  size_t offset = 0;                            // where it starts (errors)
  std::shared_ptr<Expr> group;                  // kGroup
};
struct Item {
  Atom atom;
  int min = 1, max = 1;  // max -1: unbounded
};
struct Expr {
  std::vector<std::vector<Item>> alts;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  // name -> (expression, offset of the name).
  std::vector<std::tuple<std::string, Expr, size_t>> parse() {
    std::vector<std::tuple<std::string, Expr, size_t>> rules;
    skip_space(true);
    while (i_ < s_.size()) {
      const size_t at = i_;
      std::string name = parse_name();
      if (name.empty()) fail("a rule name");
      skip_space(false);
      if (s_.substr(i_, 3) != "::=") fail("'::='");
      i_ += 3;
      skip_space(true);
      Expr e = parse_alternatives(false, 0);
      rules.emplace_back(std::move(name), std::move(e), at);
      skip_space(true);
    }
    return rules;
  }

 private:
  [[noreturn]] void fail(const std::string& expected) const {
    std::string found = i_ < s_.size() ? fmt::format("'{}'", s_.substr(i_, 1)) : "the end";
    if (i_ < s_.size() && (static_cast<unsigned char>(s_[i_]) < 0x20))
      found = fmt::format("byte 0x{:02x}", static_cast<unsigned char>(s_[i_]));
    throw GrammarError(fmt::format("grammar error at byte {}: expected {}, found {}", i_, expected,
                                   found),
                       i_);
  }

  // Spaces, tabs, comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
  }

  std::string parse_name() {
    const size_t b = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    return std::string(s_.substr(b, i_ - b));
  }

  // Whether a rule definition starts here ("name ::=").
  bool at_rule_start() const {
    size_t j = i_;
    while (j < s_.size() && name_char(s_[j])) ++j;
    if (j == i_) return false;
    while (j < s_.size() && (s_[j] == ' ' || s_[j] == '\t')) ++j;
    return s_.substr(j, 3) == "::=";
  }

  Expr parse_alternatives(bool nested, int depth) {
    if (depth > kMaxNesting) fail("less nesting");
    Expr e;
    e.alts.push_back(parse_sequence(nested, depth));
    while (i_ < s_.size() && s_[i_] == '|') {
      ++i_;
      skip_space(true);
      e.alts.push_back(parse_sequence(nested, depth));
    }
    return e;
  }

  std::vector<Item> parse_sequence(bool nested, int depth) {
    std::vector<Item> seq;
    for (;;) {
      skip_space(nested);
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (c == '|' || c == ')') break;
      if (c == '\n') break;  // top level: the rule ends
      if (!nested && at_rule_start()) break;
      Item it;
      it.atom = parse_atom(depth);
      parse_repetition(it);
      seq.push_back(std::move(it));
    }
    return seq;
  }

  Atom parse_atom(int depth) {
    Atom a;
    a.offset = i_;
    const char c = s_[i_];
    if (c == '"') {
      ++i_;
      a.kind = Atom::kLiteral;
      while (i_ < s_.size() && s_[i_] != '"') {
        if (s_[i_] == '\n') fail("'\"' before the end of the line");
        utf8_append(parse_char(), a.literal);
      }
      if (i_ >= s_.size()) fail("'\"'");
      ++i_;
    } else if (c == '[') {
      ++i_;
      a.kind = Atom::kClass;
      if (i_ < s_.size() && s_[i_] == '^') {
        a.negated = true;
        ++i_;
      }
      while (i_ < s_.size() && s_[i_] != ']') {
        const uint32_t lo = parse_char();
        uint32_t hi = lo;
        if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
          ++i_;
          hi = parse_char();
          if (hi < lo) {
            --i_;
            fail(fmt::format("a range end >= U+{:04X}", lo));
          }
        }
        a.ranges.emplace_back(lo, hi);
      }
      if (i_ >= s_.size()) fail("']'");
      ++i_;
    } else if (c == '.') {
      ++i_;
      a.kind = Atom::kClass;
      a.negated = true;  // [^] : any character
    } else if (c == '(') {
      ++i_;
      skip_space(true);
      a.kind = Atom::kGroup;
      a.group = std::make_shared<Expr>(parse_alternatives(true, depth + 1));
      skip_space(true);
      if (i_ >= s_.size() || s_[i_] != ')') fail("')'");
      ++i_;
    } else if (name_char(c)) {
      a.kind = Atom::kRuleRef;
      a.name = parse_name();
    } else {
      fail("a literal, a character class, a rule name or '('");
    }
    return a;
  }

  int parse_int() {
    const size_t b = i_;
    int v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + (s_[i_] - '0');
      if (v > kMaxRepeat) fail(fmt::format("a repetition bound of at most {}", kMaxRepeat));
      ++i_;
    }
    if (i_ == b) fail("a number");
    return v;
  }

  void parse_repetition(Item& it) {
    if (i_ >= s_.size()) return;
    const char c = s_[i_];
    if (c == '*') {
      it.min = 0, it.max = -1, ++i_;
    } else if (c == '+') {
      it.min = 1, it.max = -1, ++i_;
    } else if (c == '?') {
      it.min = 0, it.max = 1, ++i_;
    } else if (c == '{') {
      ++i_;
      skip_space(false);
      it.min = parse_int();
      skip_space(false);
      it.max = it.min;
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        skip_space(false);
        it.max = i_ < s_.size() && s_[i_] == '}' ? -1 : parse_int();
        skip_space(false);
      }
      if (i_ >= s_.size() || s_[i_] != '}') fail("'}'");
      if (it.max >= 0 && it.max < it.min) fail(fmt::format("an upper bound >= {}", it.min));
      ++i_;
    }
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int d = 0; d < digits; ++d) {
      if (i_ >= s_.size()) fail(fmt::format("{} hex digits", digits));
      const char c = s_[i_];
      int x;
      if (c >= '0' && c <= '9')
        x = c - '0';
      else if (c >= 'a' && c <= 'f')
        x = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        x = c - 'A' + 10;
      else
        fail(fmt::format("{} hex digits", digits));
      v = v * 16 + static_cast<uint32_t>(x);
      ++i_;
    }
    return v;
  }

  // One character of a literal or class (escapes decoded), as a code point.
  uint32_t parse_char() {
    if (i_ >= s_.size()) fail("a character");
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    if (c == '\\') {
      ++i_;
      if (i_ >= s_.size()) fail("an escape");
      const char e = s_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': return '\\';
        case '"': return '"';
        case '[': return '[';
        case ']': return ']';
        case '-': return '-';
        case '/': return '/';
        case '.': return '.';
        case '^': return '^';
        case 'x': return parse_hex(2);
        case 'u': return check_cp(parse_hex(4));
        case 'U': return check_cp(parse_hex(8));
        default:
          --i_;
          fail("an escape (\\n \\r \\t \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH)");
      }
    }
    // A UTF-8 sequence as one code point.
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + n > s_.size()) fail("valid UTF-8");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char b = static_cast<unsigned char>(s_[i_ + k]);
      if ((b & 0xC0) != 0x80) fail("valid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    i_ += n;
    return check_cp(cp);
  }

  uint32_t check_cp(uint32_t cp) {
    if (cp > 0x10FFFF) fail("a code point up to U+10FFFF");
    return cp;
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

// Compiles the parsed rules into byte-level rules.
class GrammarCompiler {
 public:
  std::shared_ptr<const Grammar> compile(
      const std::vector<std::tuple<std::string, Expr, size_t>>& parsed, const std::string& start) {
    auto g = std::shared_ptr<Grammar>(new Grammar());
    g_ = g.get();
    for (const auto& [name, e, at] : parsed) {
      if (ids_.count(name))
        throw GrammarError(fmt::format("grammar error at byte {}: rule '{}' is defined twice", at,
                                       name),
                           at);
      ids_[name] = new_rule(name);
    }
    const auto root = ids_.find(start);
    if (root == ids_.end())
      throw GrammarError(fmt::format("grammar error: no rule named '{}'", start), 0);
    g->root_ = root->second;
    for (const auto& [name, e, at] : parsed)
      g->rules_[static_cast<size_t>(ids_[name])] = compile_expr(e);
    check_left_recursion();
    mark_stars();
    return g;
  }

 private:
  int32_t new_rule(std::string name) {
    g_->rules_.emplace_back();
    g_->names_.push_back(std::move(name));
    return static_cast<int32_t>(g_->rules_.size()) - 1;
  }

  void count(size_t n) {
    elements_ += n;
    if (elements_ > kMaxElements)
      throw GrammarError(
          fmt::format("grammar error: more than {} elements once compiled", kMaxElements), 0);
  }

  std::vector<Grammar::Alternative> compile_expr(const Expr& e) {
    std::vector<Grammar::Alternative> alts;
    for (const auto& seq : e.alts) {
      Grammar::Alternative a;
      for (const Item& it : seq) compile_item(it, a);
      alts.push_back(std::move(a));
    }
    return alts;
  }

  static Grammar::Element rule_el(int32_t r) {
    Grammar::Element el;
    el.kind = Grammar::Element::kRule;
    el.rule = r;
    return el;
  }

  // The atom as elements appended to `out`.
  void compile_atom(const Atom& a, Grammar::Alternative& out) {
    switch (a.kind) {
      case Atom::kLiteral:
        count(a.literal.size());
        for (unsigned char b : a.literal) {
          Grammar::Element el;
          el.lo = el.hi = b;
          out.push_back(el);
        }
        return;
      case Atom::kClass:
        out.push_back(class_rule(a));
        return;
      case Atom::kRuleRef: {
        const auto it = ids_.find(a.name);
        if (it == ids_.end())
          throw GrammarError(fmt::format("grammar error at byte {}: undefined rule '{}'", a.offset,
                                         a.name),
                             a.offset);
        count(1);
        out.push_back(rule_el(it->second));
        return;
      }
      case Atom::kGroup: {
        const int32_t r = new_rule(fmt::format("group-{}", g_->rules_.size()));
        auto alts = compile_expr(*a.group);
        g_->rules_[static_cast<size_t>(r)] = std::move(alts);
        count(1);
        out.push_back(rule_el(r));
        return;
      }
    }
  }

  // A character class as one element: a single byte range when it is one
  // ASCII range, else a rule of UTF-8 byte-range sequences.
  Grammar::Element class_rule(const Atom& a) {
    std::vector<std::pair<uint32_t, uint32_t>> ranges = a.ranges;
    if (a.negated) ranges = complement_code_points(ranges);
    else ranges = normalize_code_points(ranges);
    if (ranges.size() == 1 && ranges[0].second < 0x80) {
      count(1);
      Grammar::Element el;
      el.lo = static_cast<uint8_t>(ranges[0].first);
      el.hi = static_cast<uint8_t>(ranges[0].second);
      return el;
    }
    const int32_t r = new_rule(fmt::format("class-{}", g_->rules_.size()));
    std::vector<Grammar::Alternative> alts;
    for (const auto& seq : utf8_byte_sequences(ranges)) {
      Grammar::Alternative alt;
      for (const auto& [lo, hi] : seq) {
        Grammar::Element el;
        el.lo = lo;
        el.hi = hi;
        alt.push_back(el);
      }
      count(alt.size());
      alts.push_back(std::move(alt));
    }
    g_->rules_[static_cast<size_t>(r)] = std::move(alts);
    count(1);
    return rule_el(r);
  }

  // The item (atom with its repetition) appended to `out`.
  void compile_item(const Item& it, Grammar::Alternative& out) {
    if (it.min == 1 && it.max == 1) return compile_atom(it.atom, out);
    // The atom once, as one element (a rule when it is several).
    Grammar::Alternative once;
    compile_atom(it.atom, once);
    Grammar::Element unit;
    if (once.size() == 1) {
      unit = once[0];
    } else {
      const int32_t r = new_rule(fmt::format("seq-{}", g_->rules_.size()));
      g_->rules_[static_cast<size_t>(r)] = {once};
      unit = rule_el(r);
    }
    count(static_cast<size_t>(it.min) + 1);
    for (int k = 0; k < it.min; ++k) out.push_back(unit);
    if (it.max < 0) {  // star ::= unit star | ()
      const int32_t star = new_rule(fmt::format("star-{}", g_->rules_.size()));
      g_->rules_[static_cast<size_t>(star)] = {{unit, rule_el(star)}, {}};
      out.push_back(rule_el(star));
    } else if (it.max > it.min) {  // opt_j ::= unit opt_(j-1) | ()
      int32_t prev = -1;
      for (int j = 1; j <= it.max - it.min; ++j) {
        const int32_t r = new_rule(fmt::format("opt-{}", g_->rules_.size()));
        Grammar::Alternative a = {unit};
        if (prev >= 0) a.push_back(rule_el(prev));
        count(a.size());
        g_->rules_[static_cast<size_t>(r)] = {a, {}};
        prev = r;
      }
      out.push_back(rule_el(prev));
    }
  }

  // Left recursion: rule A reaches rule B before consuming a byte when B
  // stands in an alternative of A after only nullable elements. A cycle of
  // such references expands forever when one of them is followed by more of
  // its alternative (each turn stacks another continuation). A cycle of
  // references that each end their alternative (tail calls, as in a star of
  // a nullable item: `("a"?)*`) keeps the stacks as they are, comes back to
  // a node it has seen, and is allowed. So: refuse a non-tail reference
  // whose two rules are in one strongly connected component of the graph.
  void check_left_recursion() {
    const auto& rules = g_->rules_;
    const size_t n = rules.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const auto& alt : rules[r]) {
          bool all = true;
          for (const auto& el : alt)
            if (el.kind == Grammar::Element::kBytes || !nullable[static_cast<size_t>(el.rule)]) {
              all = false;
              break;
            }
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    struct Edge {
      int32_t to;
      bool tail;
    };
    std::vector<std::vector<Edge>> first(n);
    for (size_t r = 0; r < n; ++r)
      for (const auto& alt : rules[r])
        for (size_t i = 0; i < alt.size(); ++i) {
          const auto& el = alt[i];
          if (el.kind == Grammar::Element::kBytes) break;
          first[r].push_back({el.rule, i + 1 == alt.size()});
          if (!nullable[static_cast<size_t>(el.rule)]) break;
        }
    // Tarjan's strongly connected components, iterative.
    constexpr int32_t kUnseen = -1;
    std::vector<int32_t> index(n, kUnseen), low(n, 0), comp(n, -1), stack;
    std::vector<char> on_stack(n, 0);
    int32_t next_index = 0, comps = 0;
    for (size_t s = 0; s < n; ++s) {
      if (index[s] != kUnseen) continue;
      std::vector<std::pair<int32_t, size_t>> path = {{static_cast<int32_t>(s), 0}};
      index[s] = low[s] = next_index++;
      stack.push_back(static_cast<int32_t>(s));
      on_stack[s] = 1;
      while (!path.empty()) {
        const int32_t r = path.back().first;
        const auto ru = static_cast<size_t>(r);
        size_t& k = path.back().second;
        if (k < first[ru].size()) {
          const auto v = static_cast<size_t>(first[ru][k++].to);
          if (index[v] == kUnseen) {
            index[v] = low[v] = next_index++;
            stack.push_back(static_cast<int32_t>(v));
            on_stack[v] = 1;
            path.emplace_back(static_cast<int32_t>(v), 0);
          } else if (on_stack[v]) {
            low[ru] = std::min(low[ru], index[v]);
          }
          continue;
        }
        if (low[ru] == index[ru]) {
          for (int32_t w = -1; w != r;) {
            w = stack.back();
            stack.pop_back();
            on_stack[static_cast<size_t>(w)] = 0;
            comp[static_cast<size_t>(w)] = comps;
          }
          ++comps;
        }
        path.pop_back();
        if (!path.empty()) {
          const auto up = static_cast<size_t>(path.back().first);
          low[up] = std::min(low[up], low[ru]);
        }
      }
    }
    for (size_t r = 0; r < n; ++r)
      for (const Edge& e : first[r])
        if (!e.tail && comp[static_cast<size_t>(e.to)] == comp[r])
          throw GrammarError(fmt::format("grammar error: rule '{}' is left-recursive (it can "
                                         "reach itself before matching a character)",
                                         display_name(e.to)),
                             0);
  }

  // Marks the rules shaped as Kleene stars (Grammar::is_star).
  void mark_stars() {
    const auto& rules = g_->rules_;
    g_->star_.assign(rules.size(), 0);
    for (size_t r = 0; r < rules.size(); ++r) {
      const auto& alts = rules[r];
      if (alts.size() != 2) continue;
      for (int rec = 0; rec < 2; ++rec) {
        const auto& a = alts[static_cast<size_t>(rec)];
        const bool self_last = a.size() >= 2 && a.back().kind == Grammar::Element::kRule &&
                               a.back().rule == static_cast<int32_t>(r);
        if (self_last && alts[static_cast<size_t>(1 - rec)].empty()) g_->star_[r] = 1;
      }
    }
  }

  // A generated rule's name says where it came from only loosely: name the
  // user's rule that defines it when possible.
  std::string display_name(int32_t r) const { return g_->names_[static_cast<size_t>(r)]; }

  Grammar* g_ = nullptr;
  std::map<std::string, int32_t> ids_;
  size_t elements_ = 0;
};

std::shared_ptr<const Grammar> Grammar::parse(std::string_view text, std::string_view start) {
  if (text.size() > kMaxText)
    throw GrammarError(fmt::format("grammar error: the grammar is {} bytes, more than {}",
                                   text.size(), kMaxText),
                       kMaxText);
  Parser p(text);
  const auto parsed = p.parse();
  GrammarCompiler c;
  return c.compile(parsed, std::string(start));
}

}  // namespace pagellm
