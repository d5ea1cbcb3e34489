#include "jinja/jinja_format.h"

#include <cmath>
#include <cstdio>

#include "jinja/jinja_pystr.h"

namespace pagellm::jinja {
namespace {

std::string c_format(const std::string& spec, double v) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof(buf), spec.c_str(), v);
  if (n < 0 || n >= static_cast<int>(sizeof(buf))) throw ValueError("formatted number too long");
  return std::string(buf, n);
}

std::string c_format_int(const std::string& spec, long long v) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof(buf), spec.c_str(), v);
  if (n < 0 || n >= static_cast<int>(sizeof(buf))) throw ValueError("formatted number too long");
  return std::string(buf, n);
}

// A '.' and its digits at s[i] (i moves past them): the precision, -1 when
// s[i] is not '.'.
int read_precision(std::string_view s, size_t& i) {
  if (i >= s.size() || s[i] != '.') return -1;
  ++i;
  int precision = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    precision = precision * 10 + (s[i++] - '0');
    if (precision > 1000) throw ValueError("precision too big");
  }
  return precision;
}

std::string pad_to(const std::string& s, size_t width, bool left_justify) {
  const size_t len = py::length(s);
  if (len >= width) return s;
  return left_justify ? s + std::string(width - len, ' ') : std::string(width - len, ' ') + s;
}

std::string format_unsigned(uint64_t v, int base, bool upper) {
  if (v == 0) return "0";
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  while (v > 0) {
    out.insert(out.begin(), digits[v % base]);
    v /= base;
  }
  return out;
}

// Splits an integer digit run with `sep` every three digits.
std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += sep;
    out += digits[i];
  }
  return out;
}

// One format spec applied to a value (str.format).
std::string apply_spec(const Value& v, std::string_view spec) {
  if (spec.empty()) return v.to_str();
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  const std::u32string s32 = py::decode(spec);
  // [[fill]align]
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  size_t skip_bytes = 0;
  if (s32.size() >= 2 && is_align(s32[1])) {
    fill.clear();
    py::append_utf8(fill, s32[0]);
    align = static_cast<char>(s32[1]);
    skip_bytes = fill.size() + 1;
  } else if (!s32.empty() && is_align(s32[0])) {
    align = static_cast<char>(s32[0]);
    skip_bytes = 1;
  }
  i = skip_bytes;
  char sign = '-';
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  bool alt = false;
  if (i < spec.size() && spec[i] == '#') {
    alt = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  size_t width = 0;
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) {
    width = width * 10 + (spec[i++] - '0');
    if (width > (size_t{1} << 20)) throw ValueError("Too many decimal digits in format string");
  }
  char group = 0;
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) group = spec[i++];
  const int precision = read_precision(spec, i);
  char type = 0;
  if (i < spec.size()) type = spec[i++];
  if (i != spec.size()) throw ValueError("Invalid format specifier");

  std::string body;
  std::string prefix;  // sign and 0x
  bool numeric = false;
  auto unknown = [&]() {
    throw ValueError(std::string("Unknown format code '") + type + "' for object of type '" +
                     v.type_name() + "'");
  };
  if (v.is_string() || (!v.is_number() && (type == 0 || type == 's'))) {
    if (type != 0 && type != 's') unknown();
    body = v.to_str();
    if (precision >= 0) body = py::slice(body, 0, precision, 1);
  } else if (v.is_number()) {
    numeric = true;
    const bool as_int = v.is_integral() && (type == 0 || std::string_view("dnxXobc").find(type) !=
                                                             std::string_view::npos);
    if (as_int) {
      const int64_t x = v.as_int();
      const uint64_t mag = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
      if (type == 'c') {
        if (x < 0 || x > 0x10FFFF) throw ValueError("%c arg not in range(0x110000)");
        py::append_utf8(body, static_cast<char32_t>(x));
        numeric = false;
      } else {
        const int base = type == 'x' || type == 'X' ? 16 : type == 'o' ? 8 : type == 'b' ? 2 : 10;
        body = format_unsigned(mag, base, type == 'X');
        if (group && base == 10) body = group_digits(body, group);
        if (alt && base != 10)
          prefix = type == 'X' ? "0X" : type == 'x' ? "0x" : type == 'o' ? "0o" : "0b";
        const std::string sgn = x < 0 ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "";
        prefix = sgn + prefix;
      }
    } else {
      if (type != 0 && std::string_view("fFeEgG%").find(type) == std::string_view::npos) unknown();
      double x = v.as_number();
      const bool neg = std::signbit(x) && !std::isnan(x);
      x = std::fabs(x);
      if (type == '%') x *= 100;
      const int p = precision < 0 ? 6 : precision;
      if (type == 0) {
        if (precision < 0) {
          body = py::float_repr(x);
        } else {
          body = c_format("%." + std::to_string(std::max(p, 1)) + "g", x);
          if (body.find_first_of(".enia") == std::string::npos) body += ".0";
        }
      } else {
        const char ct = type == '%' ? 'f' : type;
        body = c_format(std::string("%") + (alt ? "#" : "") + "." + std::to_string(p) + ct, x);
        if (type == '%') body += '%';
      }
      if (group) {
        const size_t end = body.find_first_not_of("0123456789");
        body = group_digits(body.substr(0, end), group) +
               (end == std::string::npos ? "" : body.substr(end));
      }
      prefix = neg ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "";
    }
  } else {
    unknown();
  }
  if (!align) align = numeric ? '>' : '<';
  const size_t len = py::length(prefix) + py::length(body);
  if (len >= width) return prefix + body;
  std::string padding;
  const size_t n = width - len;
  auto fills = [&](size_t k) {
    std::string out;
    for (size_t j = 0; j < k; ++j) out += fill;
    return out;
  };
  switch (align) {
    case '<':
      return prefix + body + fills(n);
    case '>':
      return fills(n) + prefix + body;
    case '^':
      return fills(n / 2) + prefix + body + fills(n - n / 2);
    default:  // '='
      return prefix + fills(n) + body;
  }
}

}  // namespace

std::string percent_format(Evaluator& ev, std::string_view fmt, const Value& args) {
  ValueList positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.list();
  } else {
    if (args.is_dict()) mapping = &args.dict();
    positional.push_back(args);
  }
  size_t next = 0;
  std::string out;
  size_t i = 0;
  while (i < fmt.size()) {
    const char c = fmt[i++];
    if (c != '%') {
      out += c;
      continue;
    }
    if (i >= fmt.size()) throw ValueError("incomplete format");
    Value keyed;
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string_view::npos) throw ValueError("incomplete format key");
      if (!mapping) throw ValueError("format requires a mapping");
      const std::string key(fmt.substr(i + 1, close - i - 1));
      const Value* v = mapping->find(key);
      if (!v) throw ValueError("'" + key + "'");
      keyed = *v;
      arg = &keyed;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) {
      flags += fmt[i++];
    }
    size_t width = 0;
    if (i < fmt.size() && fmt[i] == '*') throw ValueError("'*' widths are not supported");
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) {
      width = width * 10 + (fmt[i++] - '0');
      ev.check_size(width, "a formatted field");
    }
    const int precision = read_precision(fmt, i);
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) throw ValueError("incomplete format");
    const char conv = fmt[i++];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= positional.size()) throw ValueError("not enough arguments for format string");
      arg = &positional[next++];
    }
    const bool left = flags.find('-') != std::string::npos;
    std::string piece;
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        piece = conv == 's' ? arg->to_str() : arg->repr();
        if (precision >= 0) piece = py::slice(piece, 0, precision, 1);
        piece = pad_to(piece, width, left);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        long long x;
        if (arg->is_integral()) {
          x = arg->as_int();
        } else if (arg->is_float() && (conv == 'd' || conv == 'i' || conv == 'u')) {
          x = py::float_to_int(arg->as_number());
        } else {
          throw ValueError(
              std::string("%") + conv + " format: " +
              (conv == 'd' || conv == 'i' || conv == 'u' ? "a real number" : "an integer") +
              " is required, not " + arg->type_name());
        }
        std::string spec = "%" + flags;
        if (width) spec += std::to_string(width);
        if (precision >= 0) spec += "." + std::to_string(precision);
        if (conv == 'o' && flags.find('#') != std::string::npos) {
          // Python writes 0o17 where C writes 017.
          std::string f2 = flags;
          f2.erase(f2.find('#'), 1);
          const std::string digits =
              format_unsigned(x < 0 ? 0 - static_cast<uint64_t>(x) : x, 8, false);
          piece = pad_to(std::string(x < 0 ? "-" : "") + "0o" + digits, width, left);
        } else {
          spec += std::string("ll") + (conv == 'u' || conv == 'i' ? 'd' : conv);
          piece = c_format_int(spec, x);
        }
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        if (!arg->is_number()) {
          throw ValueError(std::string("must be real number, not ") + arg->type_name());
        }
        std::string spec = "%" + flags;
        if (width) spec += std::to_string(width);
        spec += "." + std::to_string(precision < 0 ? 6 : precision) + conv;
        piece = c_format(spec, arg->as_number());
        break;
      }
      case 'c': {
        if (arg->is_integral()) {
          const int64_t cp = arg->as_int();
          if (cp < 0 || cp > 0x10FFFF) throw ValueError("%c arg not in range(0x110000)");
          py::append_utf8(piece, static_cast<char32_t>(cp));
        } else if (arg->is_string() && py::length(arg->str()) == 1) {
          piece = arg->str();
        } else {
          throw ValueError("%c requires int or char");
        }
        piece = pad_to(piece, width, left);
        break;
      }
      default:
        throw ValueError(std::string("unsupported format character '") + conv + "'");
    }
    ev.check_size(out.size() + piece.size(), "a formatted string");
    out += piece;
  }
  if (!mapping && next < positional.size()) {
    throw ValueError("not all arguments converted during string formatting");
  }
  return out;
}

std::string brace_format(Evaluator& ev, std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  bool manual = false, automatic = false;
  size_t i = 0;
  while (i < fmt.size()) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      throw ValueError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    const size_t close = fmt.find('}', i + 1);
    if (close == std::string_view::npos)
      throw ValueError("Single '{' encountered in format string");
    const std::string_view field = fmt.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string_view::npos) {
      throw ValueError("nested replacement fields are not supported");
    }
    i = close + 1;
    // field_name[!conv][:spec]
    size_t name_end = 0;
    int brackets = 0;
    while (name_end < field.size()) {
      const char ch = field[name_end];
      if (ch == '[') ++brackets;
      if (ch == ']') --brackets;
      if (brackets == 0 && (ch == '!' || ch == ':')) break;
      ++name_end;
    }
    const std::string_view name = field.substr(0, name_end);
    char conv = 0;
    std::string_view spec;
    size_t rest = name_end;
    if (rest < field.size() && field[rest] == '!') {
      if (rest + 1 >= field.size())
        throw ValueError("end of string while looking for conversion specifier");
      conv = field[rest + 1];
      rest += 2;
      if (rest < field.size() && field[rest] != ':')
        throw ValueError("expected ':' after conversion specifier");
    }
    if (rest < field.size() && field[rest] == ':') spec = field.substr(rest + 1);
    // The first part of the name: index, keyword or empty.
    size_t p = 0;
    while (p < name.size() && name[p] != '.' && name[p] != '[') ++p;
    const std::string_view head = name.substr(0, p);
    Value v;
    if (head.empty()) {
      if (manual)
        throw ValueError(
            "cannot switch from manual field specification to automatic field numbering");
      automatic = true;
      if (auto_index >= args.args.size())
        throw ValueError("Replacement index " + std::to_string(auto_index) +
                         " out of range for positional args tuple");
      v = args.args[auto_index++];
    } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
      if (automatic)
        throw ValueError(
            "cannot switch from automatic field numbering to manual field specification");
      manual = true;
      const size_t idx = std::stoul(std::string(head));
      if (idx >= args.args.size())
        throw ValueError("Replacement index " + std::to_string(idx) +
                         " out of range for positional args tuple");
      v = args.args[idx];
    } else {
      bool found = false;
      for (const auto& [k, val] : args.kwargs) {
        if (k == head) {
          v = val;
          found = true;
        }
      }
      if (!found) throw ValueError("'" + std::string(head) + "'");
    }
    while (p < name.size()) {
      if (name[p] == '.') {
        size_t q = p + 1;
        while (q < name.size() && name[q] != '.' && name[q] != '[') ++q;
        v = ev.getattr(v, name.substr(p + 1, q - p - 1));
        p = q;
      } else {
        const size_t q = name.find(']', p);
        if (q == std::string_view::npos) throw ValueError("Missing ']' in format string");
        const std::string key(name.substr(p + 1, q - p - 1));
        const bool digits =
            !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = ev.getitem(v, digits ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key));
        p = q + 1;
      }
    }
    if (conv == 's') {
      v = Value(v.to_str());
    } else if (conv == 'r' || conv == 'a') {
      v = Value(v.repr());
    } else if (conv != 0) {
      throw ValueError(std::string("Unknown conversion specifier ") + conv);
    }
    const std::string piece = apply_spec(v, spec);
    ev.check_size(out.size() + piece.size(), "a formatted string");
    out += piece;
  }
  return out;
}

}  // namespace pagellm::jinja
