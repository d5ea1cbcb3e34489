#include "jinja/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "jinja/jinja_pystr.h"
#include "util/strings.h"

namespace pagellm::jinja {

namespace {

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  using nlohmann::ordered_json;
  if (depth > kMaxValueDepth) {
    throw ValueError("JSON nested too deeply (more than " + std::to_string(kMaxValueDepth) +
                     " levels)");
  }
  switch (j.type()) {
    case ordered_json::value_t::null:
      return Value::none();
    case ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value(static_cast<int64_t>(u));
      }
      return Value(static_cast<double>(u));
    }
    case ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
      return Value::list(std::move(items));
    }
    case ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, v] : j.items()) d.set(Value(k), from_json_at(v, depth + 1));
      return Value::dict(std::move(d));
    }
    default:
      return Value::none();  // binary, discarded: not produced by the parser
  }
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) {
  return from_json_at(j, 0);
}

namespace {

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  auto escape_u = [&](uint32_t c) {
    out += "\\u";
    for (int k = 3; k >= 0; --k) out += hex[(c >> (4 * k)) & 0xF];
  };
  for (char32_t c : py::decode(s)) {
    if (const std::string_view e = whitespace_escape(c); !e.empty()) {
      out += e;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          escape_u(c);
        } else if (ensure_ascii && c >= 0x80) {
          if (c >= 0x10000) {
            const uint32_t v = c - 0x10000;
            escape_u(0xD800 + (v >> 10));
            escape_u(0xDC00 + (v & 0x3FF));
          } else {
            escape_u(c);
          }
        } else {
          py::append_utf8(out, c);
        }
    }
  }
  out += '"';
}

std::string float_json(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return py::float_repr(f);
}

std::string key_string(const Value& k) {
  switch (k.kind()) {
    case Kind::kString:
      return k.str();
    case Kind::kBool:
      return k.as_bool() ? "true" : "false";
    case Kind::kInt:
      return std::to_string(k.as_int());
    case Kind::kFloat:
      return float_json(k.as_number());
    case Kind::kNone:
      return "null";
    default:
      throw ValueError("keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

class Writer {
 public:
  explicit Writer(const JsonOptions& opts) : opts_(opts) {
    item_sep_ = opts.item_separator ? *opts.item_separator : (opts.indent ? "," : ", ");
    key_sep_ = opts.key_separator ? *opts.key_separator : ": ";
  }

  void write(const Value& v, int level) {
    if (level > 512) throw ValueError("tojson: value nested too deeply");
    switch (v.kind()) {
      case Kind::kNone:
        out_ += "null";
        return;
      case Kind::kBool:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case Kind::kInt:
        out_ += std::to_string(v.as_int());
        return;
      case Kind::kFloat:
        out_ += float_json(v.as_number());
        return;
      case Kind::kString:
        append_json_string(out_, v.str(), opts_.ensure_ascii);
        return;
      case Kind::kList: {
        const ValueList& items = v.list();
        if (items.empty()) {
          out_ += "[]";
          return;
        }
        out_ += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out_ += item_sep_;
          newline(level + 1);
          write(items[i], level + 1);
        }
        newline(level);
        out_ += ']';
        return;
      }
      case Kind::kDict: {
        const auto& src = v.dict().entries();
        if (src.empty()) {
          out_ += "{}";
          return;
        }
        std::vector<std::pair<std::string, const Value*>> entries;
        entries.reserve(src.size());
        for (const auto& [k, val] : src) entries.emplace_back(key_string(k), &val);
        if (opts_.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out_ += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i > 0) out_ += item_sep_;
          newline(level + 1);
          append_json_string(out_, entries[i].first, opts_.ensure_ascii);
          out_ += key_sep_;
          write(*entries[i].second, level + 1);
        }
        newline(level);
        out_ += '}';
        return;
      }
      default:
        throw ValueError("Object of type " + v.type_name() + " is not JSON serializable");
    }
  }

  std::string take() {
    if (out_.size() > opts_.max_bytes) {
      throw ValueError("tojson: the result is too large (more than " +
                       std::to_string(opts_.max_bytes) + " bytes)");
    }
    return std::move(out_);
  }

 private:
  void newline(int level) {
    if (out_.size() > opts_.max_bytes) {
      throw ValueError("tojson: the result is too large (more than " +
                       std::to_string(opts_.max_bytes) + " bytes)");
    }
    if (!opts_.indent) return;
    out_ += '\n';
    for (int i = 0; i < level; ++i) out_ += *opts_.indent;
  }

  const JsonOptions& opts_;
  std::string item_sep_, key_sep_;
  std::string out_;
};

}  // namespace

std::string to_json(const Value& v, const JsonOptions& opts) {
  Writer w(opts);
  w.write(v, 0);
  return w.take();
}

}  // namespace pagellm::jinja
