#include "jinja/jinja_lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "jinja/jinja_pystr.h"

namespace pagellm::jinja {
namespace {

size_t skip_space(const std::string& s, size_t i) {
  while (i < s.size()) {
    size_t len = 1;
    const char32_t c = py::decode_at(s, i, &len);
    if (!py::is_space(c)) break;
    i += len;
  }
  return i;
}

bool all_space(std::string_view s) {
  for (char32_t c : py::decode(s)) {
    if (!py::is_space(c)) return false;
  }
  return true;
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}

bool is_dec(char c) {
  return c >= '0' && c <= '9';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& opts) : opts_(opts) {
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!opts_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    const size_t n = src_.size();
    while (pos < n) {
      const size_t tag = find_tag(pos);
      if (tag == std::string::npos) {
        emit_data(src_.substr(pos), pos);
        break;
      }
      const char kind = src_[tag + 1];
      size_t p = tag + 2;
      char sign = 0;
      if (p < n && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      size_t raw_end = 0;
      const bool raw = kind == '%' && match_raw_begin(p, &raw_end);

      std::string text = src_.substr(pos, tag - pos);
      apply_lstrip(text, sign, kind != '{', line_starting);
      emit_data(std::move(text), pos);

      if (kind == '#') {
        pos = lex_comment(tag, p);
      } else if (raw) {
        line_starting = src_[raw_end - 1] == '\n';
        pos = lex_raw(tag, raw_end, line_starting);
      } else {
        pos = lex_tag(tag, p, kind == '%');
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    Token eof;
    eof.type = TokenType::kEof;
    eof.pos = pos_at(n);
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  // Columns count code points; positions are asked for in increasing order,
  // so the count continues from the last one on the same line.
  SourcePos pos_at(size_t off) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
    const size_t line = it - line_starts_.begin();
    size_t from = line_starts_[line - 1];
    size_t col = 1;
    if (line == cursor_line_ && off >= cursor_off_) {
      from = cursor_off_;
      col = cursor_col_;
    }
    col += py::length(std::string_view(src_).substr(from, off - from));
    cursor_line_ = line;
    cursor_off_ = off;
    cursor_col_ = col;
    return SourcePos{static_cast<int>(line), static_cast<int>(col)};
  }

  [[noreturn]] void fail(size_t off, const std::string& message) const {
    throw PositionedError{pos_at(off), message};
  }

  size_t find_tag(size_t from) const {
    size_t i = from;
    while ((i = src_.find('{', i)) != std::string::npos) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
      ++i;
    }
    return std::string::npos;
  }

  bool starts_with(size_t p, std::string_view s) const { return src_.compare(p, s.size(), s) == 0; }

  // `\s*raw\s*(-%}\s*|%})` at p; sets the end.
  bool match_raw_begin(size_t p, size_t* end) const {
    size_t q = skip_space(src_, p);
    if (!starts_with(q, "raw")) return false;
    q = skip_space(src_, q + 3);
    if (starts_with(q, "-%}")) {
      *end = skip_space(src_, q + 3);
      return true;
    }
    if (starts_with(q, "%}")) {
      *end = q + 2;
      return true;
    }
    return false;
  }

  void apply_lstrip(std::string& text, char sign, bool block_or_comment, bool line_starting) {
    if (sign == '-') {
      text = py::strip(text, std::nullopt, false, true);
    } else if (sign != '+' && opts_.lstrip_blocks && block_or_comment) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
          all_space(std::string_view(text).substr(l_pos))) {
        text.resize(l_pos);
      }
    }
  }

  void emit_data(std::string text, size_t off) {
    if (text.empty()) return;
    Token t;
    t.type = TokenType::kData;
    t.text = std::move(text);
    t.pos = pos_at(off);
    tokens_.push_back(std::move(t));
  }

  void emit(TokenType type, std::string text, size_t off) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.pos = pos_at(off);
    tokens_.push_back(std::move(t));
  }

  // After a closing delimiter at `q`: '-' strips the whitespace that follows,
  // a plain %} or #} eats one newline when trim_blocks.
  size_t after_end(size_t q, char end_sign, bool trim) const {
    if (end_sign == '-') return skip_space(src_, q);
    if (end_sign == 0 && trim && opts_.trim_blocks && q < src_.size() && src_[q] == '\n') {
      return q + 1;
    }
    return q;
  }

  size_t lex_comment(size_t tag, size_t p) {
    const size_t e = src_.find("#}", p);
    if (e == std::string::npos) fail(tag, "unclosed comment: missing '#}'");
    char end_sign = 0;
    if (e > p && (src_[e - 1] == '-' || src_[e - 1] == '+')) end_sign = src_[e - 1];
    return after_end(e + 2, end_sign, true);
  }

  size_t lex_raw(size_t tag, size_t start, bool line_starting) {
    size_t i = start;
    while ((i = src_.find("{%", i)) != std::string::npos) {
      size_t q = i + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = skip_space(src_, q);
      if (!starts_with(q, "endraw")) {
        i += 2;
        continue;
      }
      q = skip_space(src_, q + 6);
      char end_sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
      if (!starts_with(q, "%}")) {
        i += 2;
        continue;
      }
      std::string text = src_.substr(start, i - start);
      apply_lstrip(text, sign, true, line_starting);
      emit_data(std::move(text), start);
      return after_end(q + 2, end_sign, true);
    }
    fail(tag, "unclosed raw block: missing '{% endraw %}'");
  }

  size_t lex_tag(size_t tag, size_t p, bool block) {
    emit(block ? TokenType::kBlockBegin : TokenType::kVarBegin, block ? "{%" : "{{", tag);
    std::vector<std::pair<char, size_t>> balance;  // expected closer, where opened
    while (true) {
      p = skip_space(src_, p);
      if (p >= src_.size()) {
        if (!balance.empty()) {
          fail(balance.back().second,
               std::string("unclosed '") + src_[balance.back().second] + "' in tag");
        }
        fail(tag, block ? "unclosed tag: missing '%}'" : "unclosed expression: missing '}}'");
      }
      if (balance.empty()) {
        if (block) {
          if (starts_with(p, "-%}") || starts_with(p, "+%}")) {
            emit(TokenType::kBlockEnd, "%}", p);
            return after_end(p + 3, src_[p], true);
          }
          if (starts_with(p, "%}")) {
            emit(TokenType::kBlockEnd, "%}", p);
            return after_end(p + 2, 0, true);
          }
        } else {
          if (starts_with(p, "-}}")) {
            emit(TokenType::kVarEnd, "}}", p);
            return after_end(p + 3, '-', false);
          }
          if (starts_with(p, "}}")) {
            emit(TokenType::kVarEnd, "}}", p);
            return p + 2;
          }
        }
      }
      const char c = src_[p];
      if (is_dec(c)) {
        p = lex_number(p);
      } else if (is_name_start(c)) {
        size_t q = p;
        while (q < src_.size() && is_name_char(src_[q])) ++q;
        emit(TokenType::kName, src_.substr(p, q - p), p);
        p = q;
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        p = lex_operator(p, balance);
      }
    }
  }

  size_t digits(size_t p, bool (*ok)(char)) const {
    // (\d+_)*\d+ style: digits with single '_' between them
    size_t q = p;
    if (q >= src_.size() || !ok(src_[q])) return p;
    while (q < src_.size()) {
      if (ok(src_[q])) {
        ++q;
      } else if (src_[q] == '_' && q + 1 < src_.size() && ok(src_[q + 1])) {
        q += 2;
      } else {
        break;
      }
    }
    return q;
  }

  size_t lex_number(size_t p) {
    auto clean = [&](size_t a, size_t b) {
      std::string s = src_.substr(a, b - a);
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    // Float: not right after a '.', digits then (frac? exponent | frac).
    if (!(p > 0 && src_[p - 1] == '.')) {
      const size_t int_end = digits(p, is_dec);
      size_t q = int_end;
      bool frac = false;
      if (q < src_.size() && src_[q] == '.') {
        const size_t f = digits(q + 1, is_dec);
        if (f > q + 1) {
          frac = true;
          q = f;
        }
      }
      bool exp = false;
      if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        size_t r = q + 1;
        if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
        const size_t x = digits(r, is_dec);
        if (x > r) {
          exp = true;
          q = x;
        }
      }
      if (frac || exp) {
        Token t;
        t.type = TokenType::kFloat;
        t.text = clean(p, q);
        t.float_value = std::strtod(t.text.c_str(), nullptr);
        t.pos = pos_at(p);
        tokens_.push_back(std::move(t));
        return q;
      }
    }
    // Integer: 0b/0o/0x, [1-9](_?\d)*, 0(_?0)*.
    int base = 10;
    size_t q = p;
    size_t body = p;
    if (src_[p] == '0' && p + 1 < src_.size()) {
      const char x = static_cast<char>(src_[p + 1] | 0x20);
      auto bin = [](char ch) { return ch == '0' || ch == '1'; };
      auto oct = [](char ch) { return ch >= '0' && ch <= '7'; };
      auto hex = [](char ch) { return hex_value(ch) >= 0; };
      bool (*ok)(char) = x == 'b' ? +bin : x == 'o' ? +oct : x == 'x' ? +hex : nullptr;
      if (ok) {
        size_t r = p + 2;
        if (r < src_.size() && src_[r] == '_') ++r;
        const size_t e = digits(r, ok);
        if (e > r) {
          base = x == 'b' ? 2 : x == 'o' ? 8 : 16;
          body = p + 2;
          q = e;
        }
      }
    }
    if (base == 10) {
      if (src_[p] == '0') {
        q = p + 1;
        while (q + 1 < src_.size() && src_[q] == '_' && src_[q + 1] == '0') q += 2;
        while (q < src_.size() && src_[q] == '0') ++q;
      } else {
        q = digits(p, is_dec);
      }
    }
    Token t;
    t.type = TokenType::kInteger;
    t.text = src_.substr(p, q - p);
    const std::string d = clean(body, q);
    errno = 0;
    const unsigned long long v = std::strtoull(d.c_str(), nullptr, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
      fail(p, "integer literal too large: " + t.text);
    }
    t.int_value = static_cast<int64_t>(v);
    t.pos = pos_at(p);
    tokens_.push_back(std::move(t));
    return q;
  }

  size_t lex_string(size_t p) {
    const char quote = src_[p];
    std::string out;
    size_t q = p + 1;
    while (true) {
      if (q >= src_.size()) fail(p, "unterminated string literal");
      const char c = src_[q];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++q;
        continue;
      }
      if (q + 1 >= src_.size()) fail(p, "unterminated string literal");
      const char e = src_[q + 1];
      q += 2;
      switch (e) {
        case '\n':
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const int width = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t v = 0;
          for (int k = 0; k < width; ++k) {
            const int h = q + k < src_.size() ? hex_value(src_[q + k]) : -1;
            if (h < 0) fail(q - 2, std::string("truncated \\") + e + " escape in string");
            v = v * 16 + h;
          }
          if (v > 0x10FFFF) fail(q - 2, "illegal Unicode character in string");
          q += width;
          py::append_utf8(out, v);
          break;
        }
        case 'N':
          fail(q - 2, "\\N{...} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = e - '0';
            for (int k = 0; k < 2 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++k) {
              v = v * 8 + (src_[q++] - '0');
            }
            py::append_utf8(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    emit(TokenType::kString, std::move(out), p);
    return q + 1;
  }

  size_t lex_operator(size_t p, std::vector<std::pair<char, size_t>>& balance) {
    static const char* const two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two) {
      if (starts_with(p, op)) {
        emit(TokenType::kOperator, op, p);
        return p + 2;
      }
    }
    const char c = src_[p];
    if (std::strchr("+-/*%~[](){}><=.:|,;", c) == nullptr || c == 0) {
      size_t len = 1;
      const char32_t cp = py::decode_at(src_, p, &len);
      std::string ch;
      py::append_utf8(ch, cp);
      fail(p, "unexpected character '" + ch + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.emplace_back(c == '(' ? ')' : c == '[' ? ']' : '}', p);
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(p, std::string("unexpected '") + c + "'");
      if (balance.back().first != c) {
        fail(p, std::string("unexpected '") + c + "', expected '" + balance.back().first + "'");
      }
      balance.pop_back();
    }
    emit(TokenType::kOperator, std::string(1, c), p);
    return p + 1;
  }

  LexerOptions opts_;
  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  mutable size_t cursor_line_ = 0, cursor_off_ = 0, cursor_col_ = 1;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& opts) {
  return Lexer(source, opts).run();
}

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::kData:
      return "template data";
    case TokenType::kVarBegin:
      return "'{{'";
    case TokenType::kVarEnd:
      return "end of print statement '}}'";
    case TokenType::kBlockBegin:
      return "'{%'";
    case TokenType::kBlockEnd:
      return "end of statement block '%}'";
    case TokenType::kName:
    case TokenType::kOperator:
    case TokenType::kInteger:
    case TokenType::kFloat:
      return "'" + t.text + "'";
    case TokenType::kString:
      return "string " + py::str_repr(t.text);
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

}  // namespace pagellm::jinja
