#include "jinja/jinja_pystr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "util/strings.h"
#include "util/unicode_data.h"

namespace pagellm::jinja::py {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    int n = 0;
    char32_t c = 0;
    char32_t min = 0;
    if ((b & 0xE0) == 0xC0) {
      n = 1, c = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      n = 2, c = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      n = 3, c = b & 0x07, min = 0x10000;
    }
    bool ok = n > 0 && i + n < s.size();
    for (int k = 1; ok && k <= n; ++k) {
      const auto cb = static_cast<unsigned char>(s[i + k]);
      if ((cb & 0xC0) != 0x80) {
        ok = false;
      } else {
        c = (c << 6) | (cb & 0x3F);
      }
    }
    if (ok && (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))) ok = false;
    if (ok) {
      out.push_back(c);
      i += n + 1;
    } else {
      out.push_back(0xDC00 + b);  // surrogateescape
      ++i;
    }
  }
  return out;
}

char32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const auto b = static_cast<unsigned char>(s[i]);
  *len = 1;
  if (b < 0x80) return b;
  const int n = (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : 0;
  if (n == 0 || i + n >= s.size()) return 0xDC00 + b;
  char32_t c = n == 1 ? (b & 0x1F) : n == 2 ? (b & 0x0F) : (b & 0x07);
  for (int k = 1; k <= n; ++k) {
    const auto cb = static_cast<unsigned char>(s[i + k]);
    if ((cb & 0xC0) != 0x80) return 0xDC00 + b;
    c = (c << 6) | (cb & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (c < kMin[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0xDC00 + b;
  *len = n + 1;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c >= 0xDC80 && c <= 0xDCFF)
    out.push_back(static_cast<char>(c - 0xDC00));  // an escaped raw byte
  else
    utf8_append(c, out);
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

size_t length(std::string_view s) {
  bool ascii = true;
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  return ascii ? s.size() : decode(s).size();
}

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_digit(char32_t c) {
  return c >= '0' && c <= '9';
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x100 && c <= 0x137 && c != 0x130 && !(c & 1)) return c + 1;
  if (c >= 0x139 && c <= 0x148 && (c & 1)) return c + 1;
  if (c >= 0x14A && c <= 0x177 && !(c & 1)) return c + 1;
  if (c == 0x178) return 0xFF;
  if (c >= 0x179 && c <= 0x17E && (c & 1)) return c + 1;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c == 0x131) return 'I';
  if (c >= 0x101 && c <= 0x137 && (c & 1)) return c - 1;
  if (c >= 0x13A && c <= 0x148 && !(c & 1)) return c - 1;
  if (c >= 0x14B && c <= 0x177 && (c & 1)) return c - 1;
  if (c >= 0x17A && c <= 0x17E && !(c & 1)) return c - 1;
  if (c == 0x17F) return 'S';
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x3B1 && c <= 0x3C9) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return c;
}

bool is_cased(char32_t c) {
  return to_upper(c) != c || to_lower(c) != c || c == 0xDF;
}

bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (is_cased(c) || c == 0xAA || c == 0xBA) return true;
  return (c >= 0x3040 && c <= 0x30FF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7A3) ||
         (c >= 0x0600 && c <= 0x06FF && !(c >= 0x0660 && c <= 0x0669)) ||
         (c >= 0x05D0 && c <= 0x05EA) || (c >= 0x0E01 && c <= 0x0E30);
}

namespace {

bool in_chars(char32_t c, const std::u32string& chars) {
  return chars.find(c) != std::u32string::npos;
}

}  // namespace

std::string strip(std::string_view s, std::optional<std::string_view> chars, bool left,
                  bool right) {
  if (!chars) {  // whitespace: look at the ends only
    size_t b = 0, e = s.size(), len = 1;
    while (left && b < e && is_space(decode_at(s, b, &len))) b += len;
    while (right && e > b) {
      size_t start = e - 1;
      while (start > b && e - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) {
        --start;
      }
      const char32_t c = decode_at(s, start, &len);
      if (start + len != e || !is_space(c)) break;
      e = start;
    }
    return std::string(s.substr(b, e - b));
  }
  const std::u32string text = decode(s);
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? in_chars(c, set) : is_space(c); };
  size_t b = 0, e = text.size();
  if (left) {
    while (b < e && strip_it(text[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(text[e - 1])) --e;
  }
  return encode(std::u32string_view(text).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, std::optional<std::string_view> sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw std::invalid_argument("empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::u32string text = decode(s);
  size_t i = 0;
  while (true) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (i == text.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = text.size();
      while (e > i && is_space(text[e - 1])) --e;
      out.push_back(encode(std::u32string_view(text).substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < text.size() && !is_space(text[j])) ++j;
    out.push_back(encode(std::u32string_view(text).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, std::optional<std::string_view> sep,
                                int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, -1);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw std::invalid_argument("empty separator");
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    const std::u32string text = decode(s);
    size_t e = text.size();
    while (true) {
      while (e > 0 && is_space(text[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<int64_t>(out.size()) == maxsplit) {
        size_t b = 0;
        while (b < e && is_space(text[b])) ++b;
        out.push_back(encode(std::u32string_view(text).substr(b, e - b)));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_space(text[b - 1])) --b;
      out.push_back(encode(std::u32string_view(text).substr(b, e - b)));
      e = b;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const std::u32string text = decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    const char32_t c = text[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                     c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    if (c == '\r' && end < text.size() && text[end] == '\n') ++end;
    out.push_back(encode(std::u32string_view(text).substr(start, (keepends ? end : i) - start)));
    start = i = end;
  }
  if (start < text.size()) out.push_back(encode(std::u32string_view(text).substr(start)));
  return out;
}

size_t replaced_size(std::string_view s, std::string_view old, std::string_view repl,
                     int64_t count) {
  size_t hits = 0;
  if (old.empty()) {
    hits = length(s) + 1;
  } else {
    for (size_t p = s.find(old); p != std::string_view::npos; p = s.find(old, p + old.size()))
      ++hits;
  }
  if (count >= 0) hits = std::min<size_t>(hits, static_cast<size_t>(count));
  return s.size() - hits * old.size() + hits * repl.size();
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    const std::u32string text = decode(s);
    int64_t done = 0;
    for (char32_t c : text) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : decode(s)) {
    if (c == 0xDF) {
      out += "SS";
    } else {
      append_utf8(out, to_upper(c));
    }
  }
  return out;
}

std::string lower(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : decode(s)) {
    if (c < 0x80) {
      out.push_back(to_lower(c));
    } else {
      append_lower(c, out);  // Unicode's full mapping, from Python's tables
    }
  }
  return encode(out);
}

std::string capitalize(std::string_view s) {
  std::u32string text = decode(s);
  for (size_t i = 0; i < text.size(); ++i) text[i] = i == 0 ? to_upper(text[i]) : to_lower(text[i]);
  return encode(text);
}

std::string title(std::string_view s) {
  std::u32string text = decode(s);
  bool prev_cased = false;
  for (char32_t& c : text) {
    const bool cased = is_cased(c);
    c = prev_cased ? to_lower(c) : to_upper(c);
    prev_cased = cased;
  }
  return encode(text);
}

std::string swapcase(std::string_view s) {
  std::u32string text = decode(s);
  for (char32_t& c : text) {
    const char32_t up = to_upper(c);
    c = up != c ? up : to_lower(c);
  }
  return encode(text);
}

std::vector<int64_t> slice_indices(int64_t n, std::optional<int64_t> start,
                                   std::optional<int64_t> stop, int64_t step) {
  if (step == 0) throw std::invalid_argument("slice step cannot be zero");
  auto adjust = [n](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) {
      v += n;
      if (v < lo) v = lo;
    } else if (v > hi) {
      v = hi;
    }
    return v;
  };
  std::vector<int64_t> out;
  if (step > 0) {
    const int64_t b = start ? adjust(*start, 0, n) : 0;
    const int64_t e = stop ? adjust(*stop, 0, n) : n;
    for (int64_t i = b; i<e; i = e - i> step ? i + step : e) out.push_back(i);
  } else {
    const int64_t b = start ? adjust(*start, -1, n - 1) : n - 1;
    const int64_t e = stop ? adjust(*stop, -1, n - 1) : -1;
    for (int64_t i = b; i > e; i = i - e > -step ? i + step : e) out.push_back(i);
  }
  return out;
}

std::string slice(std::string_view s, std::optional<int64_t> start, std::optional<int64_t> stop,
                  int64_t step) {
  const std::u32string text = decode(s);
  std::string out;
  for (int64_t i : slice_indices(static_cast<int64_t>(text.size()), start, stop, step)) {
    append_utf8(out, text[i]);
  }
  return out;
}

int64_t float_to_int(double f) {
  if (!std::isfinite(f)) throw std::out_of_range("cannot convert float infinity or NaN to integer");
  const double t = std::trunc(f);
  if (t < -9223372036854775808.0 || t >= 9223372036854775808.0) {
    throw std::out_of_range("integer overflow (beyond 64 bits)");
  }
  return static_cast<int64_t>(t);
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.erase(0, 1);
  }
  const size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp10 = std::stoi(sci.substr(epos + 1));
  const int decpt = exp10 + 1;
  const int nd = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (nd > 1) out += "." + digits.substr(1);
    const int e = decpt - 1;
    out += e < 0 ? "e-" : "e+";
    const std::string es = std::to_string(e < 0 ? -e : e);
    if (es.size() < 2) out += '0';
    out += es;
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (decpt < nd) {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  } else {
    out += digits + std::string(decpt - nd, '0') + ".0";
  }
  return out;
}

namespace {

bool printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c >= 0xDC80 && c <= 0xDCFF) return false;  // escaped raw bytes
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) || c == 0x3000 || c == 0xFEFF ||
      (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xE000 && c <= 0xF8FF) ||
      (c >= 0xD800 && c <= 0xDFFF) || (c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD ||
      c == 0x70F || c == 0x180E) {
    return false;
  }
  return true;
}

}  // namespace

std::string str_repr(std::string_view s) {
  const std::u32string text = decode(s);
  const bool has_single = text.find(U'\'') != std::u32string::npos;
  const bool has_double = text.find(U'"') != std::u32string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  static const char* hex = "0123456789abcdef";
  for (char32_t c : text) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (printable(c)) {
      append_utf8(out, c);
    } else {
      // Raw bytes (U+DC80..U+DCFF) print as the surrogates Python holds.
      const char32_t v = c;
      const int width = v < 0x100 ? 2 : v < 0x10000 ? 4 : 8;
      out += width == 2 ? "\\x" : width == 4 ? "\\u" : "\\U";
      for (int k = width - 1; k >= 0; --k) out += hex[(v >> (4 * k)) & 0xF];
    }
  }
  out += quote;
  return out;
}

}  // namespace pagellm::jinja::py
