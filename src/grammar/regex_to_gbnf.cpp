#include "grammar/regex_to_gbnf.h"

#include <fmt/format.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/utf8_ranges.h"

namespace pagellm {

namespace {

constexpr int kMaxRepeat = 10000;

// The GBNF of a set of code points inside a JSON string: the plain ones as a
// class, and " and \ as their escapes when in the set.
std::string json_chars(CodePointRanges set) {
  set = normalize_code_points(set);
  const bool quote = [&] {
    for (auto [lo, hi] : set)
      if (lo <= '"' && '"' <= hi) return true;
    return false;
  }();
  const bool backslash = [&] {
    for (auto [lo, hi] : set)
      if (lo <= '\\' && '\\' <= hi) return true;
    return false;
  }();
  // Remove controls, " and \ (they need escapes).
  CodePointRanges plain = complement_code_points(
      {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
  CodePointRanges keep;
  for (auto [a, b] : set)
    for (auto [c, d] : plain) {
      const uint32_t lo = std::max(a, c), hi = std::min(b, d);
      if (lo <= hi) keep.emplace_back(lo, hi);
    }
  std::vector<std::string> alts;
  if (!keep.empty()) {
    std::string cls = "[";
    for (auto [lo, hi] : keep) {
      cls += fmt::format("\\U{:08X}", lo);
      if (hi != lo) cls += fmt::format("-\\U{:08X}", hi);
    }
    alts.push_back(cls + "]");
  }
  if (quote) alts.push_back("\"\\\\\\\"\"");     // the two characters \"
  if (backslash) alts.push_back("\"\\\\\\\\\"");  // the two characters \\ .
  if (alts.empty()) throw RegexError("a character class that matches no JSON string character");
  if (alts.size() == 1) return alts[0];
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return "(" + out + ")";
}

const CodePointRanges kDigit = {{'0', '9'}};
const CodePointRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodePointRanges kSpace = {{'\t', '\r'}, {' ', ' '}};

class RegexParser {
 public:
  explicit RegexParser(const std::string& p) : s_(p) {}

  std::string parse() {
    if (i_ < s_.size() && s_[i_] == '^') ++i_;
    std::string e = alternatives(0);
    if (i_ < s_.size()) fail("unbalanced ')'");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw RegexError(fmt::format("{} at offset {} of the pattern", what, i_));
  }

  std::string alternatives(int depth) {
    if (depth > 64) fail("groups nested too deeply");
    std::vector<std::string> alts = {sequence(depth)};
    while (i_ < s_.size() && s_[i_] == '|') {
      ++i_;
      alts.push_back(sequence(depth));
    }
    if (alts.size() == 1) return alts[0];
    std::string out;
    for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
    return "(" + out + ")";
  }

  std::string sequence(int depth) {
    std::string out;
    while (i_ < s_.size() && s_[i_] != '|' && s_[i_] != ')') {
      if (s_[i_] == '$' && i_ + 1 == s_.size()) {
        ++i_;
        break;
      }
      std::string atom_expr = atom(depth);
      atom_expr = quantified(atom_expr);
      out += (out.empty() ? "" : " ") + atom_expr;
    }
    return out.empty() ? "\"\"" : "(" + out + ")";
  }

  int number() {
    int v = 0;
    const size_t b = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + (s_[i_++] - '0');
      if (v > kMaxRepeat) fail("a repetition bound over 10000");
    }
    if (i_ == b) fail("a number");
    return v;
  }

  std::string quantified(const std::string& a) {
    if (i_ >= s_.size()) return a;
    std::string q;
    const char c = s_[i_];
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++i_;
    } else if (c == '{') {
      ++i_;
      const int m = number();
      int n = m;
      bool open = false;
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        if (i_ < s_.size() && s_[i_] == '}') open = true;
        else n = number();
      }
      if (i_ >= s_.size() || s_[i_] != '}') fail("'}'");
      ++i_;
      if (!open && n < m) fail("a bound {m,n} with n >= m");
      q = open ? fmt::format("{{{},}}", m) : fmt::format("{{{},{}}}", m, n);
    } else {
      return a;
    }
    if (i_ < s_.size() && (s_[i_] == '?' || s_[i_] == '+')) ++i_;  // lazy/possessive: same language
    return "(" + a + ")" + q;
  }

  uint32_t utf8_char() {
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + n > s_.size()) fail("valid UTF-8");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s_[i_ + k]) & 0x3F);
    i_ += n;
    return cp;
  }

  // An escape after '\': a class (d w s D W S) into `set`, or a literal code point.
  bool escape(CodePointRanges& set, uint32_t& literal) {
    if (i_ >= s_.size()) fail("an escape");
    const char e = s_[i_++];
    auto cls = [&](const CodePointRanges& r, bool negate) {
      set = negate ? complement_code_points(r) : r;
      return true;
    };
    switch (e) {
      case 'd': return cls(kDigit, false);
      case 'D': return cls(kDigit, true);
      case 'w': return cls(kWord, false);
      case 'W': return cls(kWord, true);
      case 's': return cls(kSpace, false);
      case 'S': return cls(kSpace, true);
      case 'n': literal = '\n'; return false;
      case 't': literal = '\t'; return false;
      case 'r': literal = '\r'; return false;
      case 'b': case 'B': case 'A': case 'z': case 'Z': case 'G':
        --i_;
        fail(fmt::format("the anchor \\{} (not supported)", e));
      default:
        if (e >= '0' && e <= '9') {
          --i_;
          fail("a backreference (not supported)");
        }
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          --i_;
          fail(fmt::format("the escape \\{} (not supported)", e));
        }
        literal = static_cast<unsigned char>(e);
        return false;
    }
  }

  std::string atom(int depth) {
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      if (i_ < s_.size() && s_[i_] == '?') {
        if (i_ + 1 < s_.size() && s_[i_ + 1] == ':')
          i_ += 2;
        else
          fail("a lookaround or named group (not supported)");
      }
      std::string e = alternatives(depth + 1);
      if (i_ >= s_.size() || s_[i_] != ')') fail("')'");
      ++i_;
      return e;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return json_chars(complement_code_points({{'\n', '\n'}}));
    }
    if (c == '^' || c == '$') fail("an anchor inside the pattern (not supported)");
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("a quantifier with nothing before it");
    CodePointRanges set;
    uint32_t lit = 0;
    if (c == '\\') {
      ++i_;
      if (escape(set, lit)) return json_chars(set);
    } else {
      lit = utf8_char();
    }
    return json_chars({{lit, lit}});
  }

  std::string char_class() {
    ++i_;  // [
    bool negate = false;
    if (i_ < s_.size() && s_[i_] == '^') {
      negate = true;
      ++i_;
    }
    CodePointRanges set;
    bool first = true;
    while (i_ < s_.size() && (s_[i_] != ']' || first)) {
      first = false;
      uint32_t lo;
      if (s_[i_] == '\\') {
        ++i_;
        CodePointRanges sub;
        if (escape(sub, lo)) {
          set.insert(set.end(), sub.begin(), sub.end());
          continue;
        }
      } else {
        lo = utf8_char();
      }
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        if (s_[i_] == '\\') {
          ++i_;
          CodePointRanges sub;
          if (escape(sub, hi)) fail("a class escape as a range end");
        } else {
          hi = utf8_char();
        }
        if (hi < lo) fail("a range whose end is before its start");
      }
      set.emplace_back(lo, hi);
    }
    if (i_ >= s_.size()) fail("']'");
    ++i_;
    return json_chars(negate ? complement_code_points(set) : set);
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

std::string regex_to_gbnf(const std::string& pattern) {
  return RegexParser(pattern).parse();
}

}  // namespace pagellm
