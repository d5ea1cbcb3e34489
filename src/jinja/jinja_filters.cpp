#include "jinja/jinja_filters.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_format.h"
#include "jinja/jinja_json.h"
#include "jinja/jinja_pystr.h"
#include "jinja/jinja_tests.h"

namespace pagellm::jinja {
namespace {

using FilterFn = Value (*)(Evaluator&, const Value&, const CallArgs&);

bool arg_bool(const std::optional<Value>& v, bool def) {
  return v ? v->truthy() : def;
}

int64_t arg_int(const std::optional<Value>& v, int64_t def, const char* what) {
  if (!v || v->is_none()) return def;
  if (v->is_integral()) return v->as_int();
  if (v->is_float()) return py::float_to_int(v->as_number());
  throw ValueError(std::string(what) + " must be an integer, not " + v->type_name());
}

// Jinja's make_attrgetter: "a.b.0" looks up item a, then b, then 0.
Value attr_path(Evaluator& ev, Value item, const std::optional<Value>& attribute,
                const std::optional<Value>& default_value = std::nullopt) {
  if (!attribute || attribute->is_none()) return item;
  if (attribute->is_integral()) return ev.getitem(item, *attribute);
  const std::string path = attribute->to_str();
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string::npos) dot = path.size();
    const std::string part = path.substr(start, dot - start);
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    item = ev.getitem(item, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (default_value && item.is_undefined()) item = *default_value;
    start = dot + 1;
  }
  return item;
}

Value ignore_case(const Value& v) {
  return v.is_string() ? Value(py::lower(v.str())) : v;
}

Value f_abs(Evaluator&, const Value& in, const CallArgs&) {
  if (in.is_float()) return Value(std::fabs(in.as_number()));
  if (in.is_integral()) {
    if (in.as_int() == INT64_MIN) throw ValueError("integer overflow (beyond 64 bits)");
    return Value(in.as_int() < 0 ? -in.as_int() : in.as_int());
  }
  throw ValueError("bad operand type for abs(): '" + in.type_name() + "'");
}

Value f_attr(Evaluator& ev, const Value& in, const CallArgs& a) {
  a.check("attr", {"name"});
  const auto name = a.get(0, "name");
  if (!name || !name->is_string()) throw ValueError("attr() needs an attribute name");
  if (in.is_undefined()) return ev.getattr(in, name->str());
  if (in.is_object()) {
    if (auto v = in.object().attr(name->str())) return *v;
  } else if (auto m = builtin_method(in, name->str())) {
    return *m;
  }
  return Value::undefined("'" + in.type_name() + " object' has no attribute '" + name->str() + "'");
}

Value f_batch(Evaluator& ev, const Value& in, const CallArgs& a) {
  a.check("batch", {"linecount", "fill_with"});
  const int64_t n = arg_int(a.get(0, "linecount"), 0, "linecount");
  if (n <= 0) throw ValueError("batch() linecount must be positive");
  const auto fill = a.get(1, "fill_with");
  ValueList out, cur;
  for (Value& item : ev.iterate(in)) {
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
    cur.push_back(std::move(item));
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none()) {
      ev.check_size(static_cast<size_t>(n), "a list");
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    }
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_capitalize(Evaluator&, const Value& in, const CallArgs&) {
  return Value(py::capitalize(in.to_str()));
}

Value f_center(Evaluator& ev, const Value& in, const CallArgs& a) {
  a.check("center", {"width"});
  const int64_t width = arg_int(a.get(0, "width"), 80, "width");
  const std::string s = in.to_str();
  const auto len = static_cast<int64_t>(py::length(s));
  if (width <= len) return Value(s);
  ev.check_size(s.size() + static_cast<size_t>(width - len), "a string");
  const int64_t marg = width - len;
  const int64_t left = marg / 2 + (marg & width & 1);
  return Value(std::string(left, ' ') + s + std::string(marg - left, ' '));
}

Value f_default(Evaluator&, const Value& in, const CallArgs& a) {
  a.check("default", {"default_value", "boolean"});
  if (in.is_undefined() || (arg_bool(a.get(1, "boolean"), false) && !in.truthy())) {
    return a.get(0, "default_value").value_or(Value(""));
  }
  return in;
}

Value f_dictsort(Evaluator&, const Value& in, const CallArgs& a) {
  a.check("dictsort", {"case_sensitive", "by", "reverse"});
  if (!in.is_dict()) throw ValueError("dictsort expects a mapping, got " + in.type_name());
  const bool cs = arg_bool(a.get(0, "case_sensitive"), false);
  const std::string by = a.get(1, "by").value_or(Value("key")).to_str();
  if (by != "key" && by != "value") {
    throw ValueError("You can only sort by either \"key\" or \"value\"");
  }
  const bool reverse = arg_bool(a.get(2, "reverse"), false);
  const size_t pos = by == "key" ? 0 : 1;
  ValueList items;
  for (const auto& [k, v] : in.dict().entries()) items.push_back(Value::tuple({k, v}));
  auto key = [&](const Value& item) {
    return cs ? item.list()[pos] : ignore_case(item.list()[pos]);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? less(key(y), key(x)) : less(key(x), key(y));
  });
  return Value::list(std::move(items));
}

Value f_escape(Evaluator&, const Value& in, const CallArgs&) {
  if (in.is_safe()) return in;
  return Value::safe(html_escape(in.to_str()));
}

Value f_first(Evaluator& ev, const Value& in, const CallArgs&) {
  const ValueList items = ev.iterate(in);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Evaluator& ev, const Value& in, const CallArgs&) {
  const ValueList items = ev.iterate(in);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

std::optional<double> parse_float(const std::string& text) {
  std::string s = py::strip(text, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  const std::string low = py::lower(s);
  const std::string body = low[0] == '+' || low[0] == '-' ? low.substr(1) : low;
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    return low[0] == '-' ? -v : v;
  }
  if (body.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

Value f_float(Evaluator&, const Value& in, const CallArgs& a) {
  a.check("float", {"default"});
  if (in.is_number()) return Value(in.as_number());
  if (in.is_string()) {
    if (auto v = parse_float(in.str())) return Value(*v);
  }
  return a.get(0, "default").value_or(Value(0.0));
}

Value f_int(Evaluator&, const Value& in, const CallArgs& a) {
  a.check("int", {"default", "base"});
  const Value def = a.get(0, "default").value_or(Value(int64_t{0}));
  if (in.is_integral()) return Value(in.as_int());
  if (in.is_float()) {
    return Value(py::float_to_int(in.as_number()));
  }
  if (!in.is_string()) return def;
  const int64_t base = arg_int(a.get(1, "base"), 10, "base");
  std::string s = py::strip(in.str(), std::nullopt, true, true);
  std::string digits = s;
  digits.erase(std::remove(digits.begin(), digits.end(), '_'), digits.end());
  if (!digits.empty()) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
    if (end == digits.c_str() + digits.size() && errno == 0) return Value(static_cast<int64_t>(v));
  }
  if (auto f = parse_float(s)) {
    if (std::isfinite(*f)) return Value(py::float_to_int(*f));
  }
  return def;
}

Value f_format(Evaluator& ev, const Value& in, const CallArgs& a) {
  if (!a.args.empty() && !a.kwargs.empty()) {
    throw ValueError("can't handle positional and keyword arguments at the same time");
  }
  if (!a.kwargs.empty()) {
    Dict d;
    for (const auto& [k, v] : a.kwargs) d.set(Value(k), v);
    return Value(percent_format(ev, in.to_str(), Value::dict(std::move(d))));
  }
  return Value(percent_format(ev, in.to_str(), Value::tuple(a.args)));
}

Value f_indent(Evaluator& ev, const Value& in, const CallArgs& a) {
  a.check("indent", {"width", "first", "blank"});
  std::string indention = "    ";
  if (auto w = a.get(0, "width")) {
    if (w->is_string()) {
      indention = w->str();
    } else {
      const int64_t n = arg_int(w, 4, "width");
      ev.check_size(static_cast<size_t>(std::max<int64_t>(0, n)), "an indent");
      indention = std::string(std::max<int64_t>(0, n), ' ');
    }
  }
  const bool first = arg_bool(a.get(1, "first"), false);
  const bool blank = arg_bool(a.get(2, "blank"), false);
  const std::string s = in.to_str() + "\n";
  const std::vector<std::string> lines = py::splitlines(s);
  ev.check_size(s.size() + (lines.size() + 1) * (indention.size() + 1), "an indented string");
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? std::string() : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (first) rv = indention + rv;
  return Value(std::move(rv));
}

Value f_items(Evaluator&, const Value& in, const CallArgs&) {
  if (in.is_undefined()) return Value::list({});
  if (!in.is_dict()) throw ValueError("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, v] : in.dict().entries()) out.push_back(Value::tuple({k, v}));
  return Value::list(std::move(out));
}

Value f_join(Evaluator& ev, const Value& in, const CallArgs& a) {
  a.check("join", {"d", "attribute"});
  const std::string sep = a.get(0, "d").value_or(Value("")).to_str();
  const auto attribute = a.get(1, "attribute");
  std::vector<std::string> parts;
  size_t total = 0;
  for (const Value& item : ev.iterate(in)) {
    parts.push_back(attr_path(ev, item, attribute).to_str());
    total += parts.back().size() + sep.size();
    ev.check_size(total, "a joined string");
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return Value(std::move(out));
}

Value f_length(Evaluator&, const Value& in, const CallArgs&) {
  switch (in.kind()) {
    case Kind::kUndefined:
      return Value(int64_t{0});
    case Kind::kString:
      return Value(static_cast<int64_t>(py::length(in.str())));
    case Kind::kList:
      return Value(static_cast<int64_t>(in.list().size()));
    case Kind::kDict:
      return Value(static_cast<int64_t>(in.dict().size()));
    default:
      throw ValueError("object of type '" + in.type_name() + "' has no len()");
  }
}

Value f_list(Evaluator& ev, const Value& in, const CallArgs&) {
  return Value::list(ev.iterate(in));
}

Value f_lower(Evaluator&, const Value& in, const CallArgs&) {
  return Value(py::lower(in.to_str()));
}
Value f_upper(Evaluator&, const Value& in, const CallArgs&) {
  return Value(py::upper(in.to_str()));
}

Value f_map(Evaluator& ev, const Value& in, const CallArgs& a) {
  ValueList out;
  if (!in.truthy()) return Value::list({});  // Jinja2: `if value:` before anything
  if (a.args.empty()) {
    std::optional<Value> attribute, def;
    for (const auto& [k, v] : a.kwargs) {
      if (k == "attribute") {
        attribute = v;
      } else if (k == "default") {
        def = v;
      } else {
        throw ValueError("Unexpected keyword argument '" + k + "'");
      }
    }
    if (!attribute) throw ValueError("map requires a filter argument");
    for (const Value& item : ev.iterate(in)) out.push_back(attr_path(ev, item, attribute, def));
    return Value::list(std::move(out));
  }
  if (!a.args[0].is_string()) throw ValueError("map requires a filter name");
  const std::string name = a.args[0].str();
  if (!has_filter(name)) throw ValueError("No filter named '" + name + "'");
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  rest.kwargs = a.kwargs;
  rest.pos = a.pos;
  for (const Value& item : ev.iterate(in)) out.push_back(apply_filter(ev, name, item, rest));
  return Value::list(std::move(out));
}

Value min_max(Evaluator& ev, const Value& in, const CallArgs& a, bool want_max) {
  a.check(want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const ValueList items = ev.iterate(in);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool cs = arg_bool(a.get(0, "case_sensitive"), false);
  const auto attribute = a.get(1, "attribute");
  auto key = [&](const Value& v) {
    Value k = attr_path(ev, v, attribute);
    return cs ? k : ignore_case(k);
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (want_max ? less(best_key, k) : less(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value f_max(Evaluator& ev, const Value& in, const CallArgs& a) {
  return min_max(ev, in, a, true);
}
Value f_min(Evaluator& ev, const Value& in, const CallArgs& a) {
  return min_max(ev, in, a, false);
}

Value select_reject(Evaluator& ev, const Value& in, const CallArgs& a, bool select, bool by_attr) {
  if (!in.truthy()) return Value::list({});  // Jinja2: `if value:` before anything
  size_t off = 0;
  std::optional<Value> attribute;
  if (by_attr) {
    if (a.args.empty()) throw ValueError("Missing parameter for attribute name");
    attribute = a.args[0];
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs rest;
  rest.pos = a.pos;
  rest.kwargs = a.kwargs;
  if (a.args.size() > off) {
    if (!a.args[off].is_string()) throw ValueError("the test name must be a string");
    test = a.args[off].str();
    if (!has_test(*test)) throw ValueError("No test named '" + *test + "'");
    rest.args.assign(a.args.begin() + off + 1, a.args.end());
  }
  ValueList out;
  for (const Value& item : ev.iterate(in)) {
    const Value subject = by_attr ? attr_path(ev, item, attribute) : item;
    const bool ok = test ? apply_test(ev, *test, subject, rest) : subject.truthy();
    if (ok == select) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(Evaluator& ev, const Value& in, const CallArgs& a) {
  return select_reject(ev, in, a, true, false);
}
Value f_reject(Evaluator& ev, const Value& in, const CallArgs& a) {
  return select_reject(ev, in, a, false, false);
}
Value f_selectattr(Evaluator& ev, const Value& in, const CallArgs& a) {
  return select_reject(ev, in, a, true, true);
}
Value f_rejectattr(Evaluator& ev, const Value& in, const CallArgs& a) {
  return select_reject(ev, in, a, false, true);
}

Value f_replace(Evaluator& ev, const Value& in, const CallArgs& a) {
  a.check("replace", {"old", "new", "count"});
  const auto old_v = a.get(0, "old");
  const auto new_v = a.get(1, "new");
  if (!old_v || !new_v) throw ValueError("replace() needs the old and the new text");
  const std::string s = in.to_str(), old = old_v->to_str(), repl = new_v->to_str();
  const auto count_v = a.get(2, "count");
  const int64_t count = count_v && !count_v->is_none() ? arg_int(count_v, -1, "count") : -1;
  if (repl.size() > old.size()) ev.check_size(py::replaced_size(s, old, repl, count), "a string");
  return Value(py::replace(s, old, repl, count));
}

Value f_reverse(Evaluator& ev, const Value& in, const CallArgs&) {
  if (in.is_string()) return Value(py::slice(in.str(), std::nullopt, std::nullopt, -1));
  ValueList items = ev.iterate(in);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_round(Evaluator&, const Value& in, const CallArgs& a) {
  a.check("round", {"precision", "method"});
  const int64_t precision = arg_int(a.get(0, "precision"), 0, "precision");
  const std::string method = a.get(1, "method").value_or(Value("common")).to_str();
  if (method != "common" && method != "ceil" && method != "floor") {
    throw ValueError("method must be common, ceil or floor");
  }
  if (!in.is_number())
    throw ValueError("type " + in.type_name() + " doesn't define __round__ method");
  if (method == "common") {
    if (in.is_integral()) return Value(in.as_int());
    const double x = in.as_number();
    if (!std::isfinite(x)) return Value(x);
    if (precision >= 0 && precision <= 300) {
      char buf[512];
      std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
      return Value(std::strtod(buf, nullptr));
    }
    const double scale = std::pow(10.0, static_cast<double>(precision));
    return Value(std::nearbyint(x * scale) / scale);
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = in.as_number() * scale;
  return Value((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

Value f_safe(Evaluator&, const Value& in, const CallArgs&) {
  return in.is_safe() ? in : Value::safe(in.to_str());
}

Value f_sort(Evaluator& ev, const Value& in, const CallArgs& a) {
  a.check("sort", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = arg_bool(a.get(0, "reverse"), false);
  const bool cs = arg_bool(a.get(1, "case_sensitive"), false);
  const auto attribute = a.get(2, "attribute");
  std::vector<std::optional<Value>> attrs;
  if (attribute && attribute->is_string()) {
    for (const std::string& part : py::split(attribute->str(), std::string_view(","))) {
      attrs.emplace_back(Value(part));
    }
  } else {
    attrs.push_back(attribute);
  }
  ValueList items = ev.iterate(in);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) {
    ValueList parts;
    for (const auto& at : attrs) {
      Value k = attr_path(ev, items[i], at);
      parts.push_back(cs ? k : ignore_case(k));
    }
    keyed.emplace_back(parts.size() == 1 ? parts[0] : Value::list(std::move(parts)), i);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  ValueList out;
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value f_string(Evaluator&, const Value& in, const CallArgs&) {
  return in.is_string() ? in : Value(in.to_str());
}

Value f_sum(Evaluator& ev, const Value& in, const CallArgs& a) {
  a.check("sum", {"attribute", "start"});
  const auto attribute = a.get(0, "attribute");
  Value total = a.get(1, "start").value_or(Value(int64_t{0}));
  if (total.is_string()) throw ValueError("sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : ev.iterate(in)) {
    total = ev.binary(BinaryOp::kAdd, total, attr_path(ev, item, attribute));
  }
  return total;
}

Value f_title(Evaluator&, const Value& in, const CallArgs&) {
  // Words begin after runs of whitespace, '-', '(', '{', '[' or '<'.
  const std::u32string text = py::decode(in.to_str());
  std::u32string out;
  bool word_start = true;
  for (char32_t c : text) {
    const bool sep = py::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      out.push_back(c);
      word_start = true;
      continue;
    }
    out.push_back(word_start ? py::to_upper(c) : py::to_lower(c));
    word_start = false;
  }
  return Value(py::encode(out));
}

Value f_tojson(Evaluator& ev, const Value& in, const CallArgs& a) {
  a.check("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions opts;
  opts.ensure_ascii = arg_bool(a.get(0, "ensure_ascii"), false);
  if (auto indent = a.get(1, "indent"); indent && !indent->is_none()) {
    if (indent->is_string()) {
      opts.indent = indent->str();
    } else {
      const int64_t n = arg_int(indent, 0, "indent");
      ev.check_size(static_cast<size_t>(std::max<int64_t>(0, n)), "an indent");
      opts.indent = std::string(std::max<int64_t>(0, n), ' ');
    }
  }
  if (auto seps = a.get(2, "separators"); seps && !seps->is_none()) {
    const ValueList parts = ev.iterate(*seps);
    if (parts.size() != 2) throw ValueError("separators must be an (item, key) pair");
    opts.item_separator = parts[0].to_str();
    opts.key_separator = parts[1].to_str();
  }
  opts.sort_keys = arg_bool(a.get(3, "sort_keys"), false);
  opts.max_bytes = ev.options().limits.max_bytes;
  return Value(to_json(in, opts));
}

Value f_trim(Evaluator&, const Value& in, const CallArgs& a) {
  a.check("trim", {"chars"});
  const auto chars = a.get(0, "chars");
  std::optional<std::string> set;
  if (chars && !chars->is_none()) set = chars->to_str();
  return Value(py::strip(in.to_str(), set ? std::optional<std::string_view>(*set) : std::nullopt,
                         true, true));
}

Value f_truncate(Evaluator&, const Value& in, const CallArgs& a) {
  a.check("truncate", {"length", "killwords", "end", "leeway"});
  const int64_t length = arg_int(a.get(0, "length"), 255, "length");
  const bool killwords = arg_bool(a.get(1, "killwords"), false);
  const std::string end = a.get(2, "end").value_or(Value("...")).to_str();
  const int64_t leeway = arg_int(a.get(3, "leeway"), 5, "leeway");
  const std::string s = in.to_str();
  const auto end_len = static_cast<int64_t>(py::length(end));
  if (length < end_len) throw ValueError("expected length >= " + std::to_string(end_len));
  if (leeway < 0) throw ValueError("expected leeway >= 0");
  if (static_cast<int64_t>(py::length(s)) <= length + leeway) return Value(s);
  const std::string head = py::slice(s, 0, length - end_len, 1);
  if (killwords) return Value(head + end);
  return Value(py::rsplit(head, std::string_view(" "), 1)[0] + end);
}

Value f_unique(Evaluator& ev, const Value& in, const CallArgs& a) {
  a.check("unique", {"case_sensitive", "attribute"});
  const bool cs = arg_bool(a.get(0, "case_sensitive"), false);
  const auto attribute = a.get(1, "attribute");
  ValueList out, seen;
  for (const Value& item : ev.iterate(in)) {
    Value k = attr_path(ev, item, attribute);
    if (!cs) k = ignore_case(k);
    bool dup = false;
    for (const Value& s : seen) {
      if (equals(s, k)) {
        dup = true;
        break;
      }
    }
    if (!dup) {
      seen.push_back(std::move(k));
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value f_wordcount(Evaluator&, const Value& in, const CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : py::decode(in.to_str())) {
    const bool w =
        py::is_alpha(c) || py::is_digit(c) || c == '_' || (c >= 0x80 && !py::is_space(c));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

const std::unordered_map<std::string_view, FilterFn>& registry() {
  static const std::unordered_map<std::string_view, FilterFn> filters = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", f_batch},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"truncate", f_truncate},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return filters;
}

}  // namespace

bool has_filter(std::string_view name) {
  return registry().count(name) > 0;
}

Value apply_filter(Evaluator& ev, std::string_view name, const Value& input, const CallArgs& args) {
  const auto it = registry().find(name);
  if (it == registry().end()) throw ValueError("no filter named '" + std::string(name) + "'");
  return it->second(ev, input, args);
}

}  // namespace pagellm::jinja
