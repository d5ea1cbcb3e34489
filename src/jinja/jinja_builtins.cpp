#include "jinja/jinja_builtins.h"

#include <algorithm>
#include <ctime>

#include "jinja/jinja_format.h"
#include "jinja/jinja_pystr.h"

namespace pagellm::jinja {
namespace {

class FunctionObject : public Object {
 public:
  FunctionObject(std::string name, std::function<Value(Evaluator&, const CallArgs&)> fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return "<built-in function " + name_ + ">"; }
  bool callable() const override { return true; }
  Value call(Evaluator& ev, const CallArgs& args) override { return fn_(ev, args); }

 private:
  std::string name_;
  std::function<Value(Evaluator&, const CallArgs&)> fn_;
};

class NamespaceObject : public Object {
 public:
  explicit NamespaceObject(const Dict& attrs) : attrs_(attrs) {}
  std::string type_name() const override { return "Namespace"; }
  // As Python: a namespace met again while printing itself shows as {...}.
  std::string repr() const override {
    static thread_local std::vector<const NamespaceObject*> printing;
    if (std::find(printing.begin(), printing.end(), this) != printing.end()) {
      return "<Namespace {...}>";
    }
    printing.push_back(this);
    std::string out = "<Namespace {";
    bool first = true;
    try {
      for (const auto& [k, v] : attrs_.entries()) {
        out += first ? "" : ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
    } catch (...) {
      printing.pop_back();
      throw;
    }
    printing.pop_back();
    return out + "}>";
  }
  std::optional<Value> attr(std::string_view name) const override {
    if (const Value* v = attrs_.find(name)) return *v;
    return std::nullopt;
  }
  bool set_attr(std::string_view name, Value value) override {
    attrs_.set(Value(name), std::move(value));
    return true;
  }
  void release() override { attrs_ = Dict(); }

 private:
  Dict attrs_;
};

Value str_method(Evaluator& ev, const Value& self, std::string_view name, const CallArgs& a);
Value dict_method(const Value& self, std::string_view name, const CallArgs& a);
Value list_method(const Value& self, std::string_view name, const CallArgs& a);

class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override {
    return "<built-in method " + name_ + " of " + self_.type_name() + " object>";
  }
  bool callable() const override { return true; }
  Value call(Evaluator& ev, const CallArgs& args) override {
    if (self_.is_string()) return str_method(ev, self_, name_, args);
    if (self_.is_dict()) return dict_method(self_, name_, args);
    return list_method(self_, name_, args);
  }

 private:
  Value self_;
  std::string name_;
};

constexpr std::string_view kStrMethods[] = {
    "strip",        "lstrip",    "rstrip",    "split",   "rsplit",     "splitlines", "startswith",
    "endswith",     "upper",     "lower",     "title",   "capitalize", "swapcase",   "casefold",
    "replace",      "find",      "rfind",     "index",   "rindex",     "count",      "join",
    "isdigit",      "isnumeric", "isdecimal", "isalpha", "isalnum",    "isspace",    "islower",
    "isupper",      "format",    "zfill",     "center",  "ljust",      "rjust",      "removeprefix",
    "removesuffix", "partition", "rpartition"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values", "copy"};
constexpr std::string_view kListMethods[] = {"index", "count", "copy"};
constexpr std::string_view kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                            "pop",    "remove", "reverse", "sort"};

template <size_t N>
bool in(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

std::optional<std::string> opt_str(const std::optional<Value>& v, const char* what) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) {
    throw ValueError(std::string(what) + " arg must be None or str, not " + v->type_name());
  }
  return v->str();
}

std::string req_str(const std::optional<Value>& v, const char* method) {
  if (!v) throw ValueError(std::string(method) + "() missing a required argument");
  if (!v->is_string()) {
    throw ValueError(std::string(method) + "() argument must be str, not " + v->type_name());
  }
  return v->str();
}

int64_t req_int(const std::optional<Value>& v, const char* method, int64_t def) {
  if (!v || v->is_none()) return def;
  if (!v->is_integral()) {
    throw ValueError(std::string(method) + "(): '" + v->type_name() +
                     "' object cannot be interpreted as an integer");
  }
  return v->as_int();
}

Value string_list(const std::vector<std::string>& parts) {
  ValueList out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.emplace_back(p);
  return Value::list(std::move(out));
}

// Code-point slice bounds of s[start:end] as byte offsets.
std::pair<size_t, size_t> byte_range(const std::string& s, const std::optional<Value>& start,
                                     const std::optional<Value>& end) {
  const std::u32string text = py::decode(s);
  const auto n = static_cast<int64_t>(text.size());
  auto norm = [n](int64_t v) { return v < 0 ? std::max<int64_t>(0, v + n) : std::min(v, n); };
  const int64_t b = norm(req_int(start, "slice", 0));
  const int64_t e = norm(req_int(end, "slice", n));
  const size_t bb = py::encode(std::u32string_view(text).substr(0, b)).size();
  const size_t eb =
      e <= b ? bb : bb + py::encode(std::u32string_view(text).substr(b, e - b)).size();
  return {bb, eb};
}

bool affix_match(const std::string& s, const Value& affix, bool prefix,
                 const std::optional<Value>& start, const std::optional<Value>& end) {
  auto [b, e] = byte_range(s, start, end);
  const std::string_view view = std::string_view(s).substr(b, e - b);
  auto one = [&](const Value& v) {
    if (!v.is_string()) {
      throw ValueError(std::string(prefix ? "startswith" : "endswith") +
                       " first arg must be str or a tuple of str, not " + v.type_name());
    }
    const std::string& x = v.str();
    if (x.size() > view.size()) return false;
    return prefix ? view.substr(0, x.size()) == x : view.substr(view.size() - x.size()) == x;
  };
  if (affix.is_tuple()) {
    for (const Value& v : affix.list()) {
      if (one(v)) return true;
    }
    return false;
  }
  return one(affix);
}

int64_t cp_index(const std::string& s, size_t byte_off) {
  return static_cast<int64_t>(py::length(std::string_view(s).substr(0, byte_off)));
}

Value find_method(const std::string& s, std::string_view name, const CallArgs& a) {
  const std::string& sub = req_str(a.get(0, "sub"), std::string(name).c_str());
  auto [b, e] = byte_range(s, a.get(1, "start"), a.get(2, "end"));
  const std::string_view view = std::string_view(s).substr(b, e - b);
  if (name == "count") {
    if (sub.empty()) return Value(static_cast<int64_t>(py::length(view) + 1));
    int64_t n = 0;
    for (size_t p = view.find(sub); p != std::string_view::npos; p = view.find(sub, p + sub.size()))
      ++n;
    return Value(n);
  }
  const bool reverse = name == "rfind" || name == "rindex";
  const size_t hit = reverse ? view.rfind(sub) : view.find(sub);
  if (hit == std::string_view::npos) {
    if (name == "index" || name == "rindex") throw ValueError("substring not found");
    return Value(int64_t{-1});
  }
  return Value(cp_index(s, b + hit));
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  const std::u32string text = py::decode(s);
  if (text.empty()) return false;
  for (char32_t c : text) {
    if (!pred(c)) return false;
  }
  return true;
}

bool case_check(const std::string& s, bool want_lower) {
  bool cased = false;
  for (char32_t c : py::decode(s)) {
    const bool is_lower = py::to_upper(c) != c || c == 0xDF;
    const bool is_upper = py::to_lower(c) != c;
    if (want_lower ? is_upper : is_lower) return false;
    cased = cased || is_lower || is_upper;
  }
  return cased;
}

std::string pad(Evaluator& ev, const std::string& s, const CallArgs& a, char how) {
  const int64_t width = req_int(a.get(0, "width"), "pad", 0);
  std::string fill = " ";
  if (auto f = a.get(1, "fillchar")) {
    if (!f->is_string() || py::length(f->str()) != 1) {
      throw ValueError("The fill character must be exactly one character long");
    }
    fill = f->str();
  }
  const auto len = static_cast<int64_t>(py::length(s));
  if (width <= len) return s;
  ev.check_size(s.size() + static_cast<size_t>(width - len) * fill.size(), "a string");
  const int64_t marg = width - len;
  int64_t left = 0;
  if (how == 'c') {
    left = marg / 2 + (marg & width & 1);
  } else if (how == 'r') {
    left = marg;
  }
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = left; i < marg; ++i) out += fill;
  return out;
}

Value str_method(Evaluator& ev, const Value& self, std::string_view name, const CallArgs& a) {
  const std::string& s = self.str();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto chars = opt_str(a.get(0, "chars"), name.data());
    return Value(py::strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    a.check(name, {"sep", "maxsplit"});
    const auto sep = opt_str(a.get(0, "sep"), "sep");
    const int64_t maxsplit = req_int(a.get(1, "maxsplit"), "split", -1);
    return string_list(name == "split" ? py::split(s, sep, maxsplit)
                                       : py::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    const auto keep = a.get(0, "keepends");
    return string_list(py::splitlines(s, keep && keep->truthy()));
  }
  if (name == "startswith" || name == "endswith") {
    const auto affix = a.get(0, "prefix");
    if (!affix) throw ValueError(std::string(name) + "() takes at least 1 argument (0 given)");
    return Value(affix_match(s, *affix, name == "startswith", a.get(1, "start"), a.get(2, "end")));
  }
  if (name == "upper") return Value(py::upper(s));
  if (name == "lower" || name == "casefold") return Value(py::lower(s));
  if (name == "title") return Value(py::title(s));
  if (name == "capitalize") return Value(py::capitalize(s));
  if (name == "swapcase") return Value(py::swapcase(s));
  if (name == "replace") {
    const std::string& old = req_str(a.get(0, "old"), "replace");
    const std::string& repl = req_str(a.get(1, "new"), "replace");
    const int64_t count = req_int(a.get(2, "count"), "replace", -1);
    if (repl.size() > old.size()) ev.check_size(py::replaced_size(s, old, repl, count), "a string");
    return Value(py::replace(s, old, repl, count));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return find_method(s, name, a);
  }
  if (name == "join") {
    const auto items = a.get(0, "iterable");
    if (!items) throw ValueError("join() takes exactly one argument (0 given)");
    const ValueList parts = ev.iterate(*items);
    size_t total = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i].is_string()) {
        throw ValueError("sequence item " + std::to_string(i) + ": expected str instance, " +
                         parts[i].type_name() + " found");
      }
      total += parts[i].str().size() + s.size();
    }
    ev.check_size(total, "a string");
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) out += s;
      out += parts[i].str();
    }
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") {
    return Value(all_chars(s, py::is_digit));
  }
  if (name == "isalpha") return Value(all_chars(s, py::is_alpha));
  if (name == "isalnum") {
    return Value(all_chars(s, [](char32_t c) { return py::is_alpha(c) || py::is_digit(c); }));
  }
  if (name == "isspace") return Value(all_chars(s, py::is_space));
  if (name == "islower") return Value(case_check(s, true));
  if (name == "isupper") return Value(case_check(s, false));
  if (name == "format") return Value(brace_format(ev, s, a));
  if (name == "zfill") {
    const int64_t width = req_int(a.get(0, "width"), "zfill", 0);
    const auto len = static_cast<int64_t>(py::length(s));
    if (width <= len) return Value(s);
    ev.check_size(static_cast<size_t>(width), "a string");
    const size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    return Value(s.substr(0, sign) + std::string(width - len, '0') + s.substr(sign));
  }
  if (name == "center") return Value(pad(ev, s, a, 'c'));
  if (name == "ljust") return Value(pad(ev, s, a, 'l'));
  if (name == "rjust") return Value(pad(ev, s, a, 'r'));
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& x = req_str(a.get(0, "affix"), name.data());
    if (name == "removeprefix") {
      return Value(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
    }
    if (x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0) {
      return Value(s.substr(0, s.size() - x.size()));
    }
    return Value(s);
  }
  if (name == "partition" || name == "rpartition") {
    const std::string& sep = req_str(a.get(0, "sep"), name.data());
    if (sep.empty()) throw ValueError("empty separator");
    const size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos) {
      return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")})
                                 : Value::tuple({Value(""), Value(""), Value(s)});
    }
    return Value::tuple({Value(s.substr(0, hit)), Value(sep), Value(s.substr(hit + sep.size()))});
  }
  throw ValueError("'str' object has no method '" + std::string(name) + "'");
}

Value dict_method(const Value& self, std::string_view name, const CallArgs& a) {
  const Dict& d = self.dict();
  if (name == "get") {
    a.check("get", {"key", "default"});
    const auto key = a.get(0, "key");
    if (!key) throw ValueError("get expected at least 1 argument, got 0");
    if (const Value* v = d.find(*key)) return *v;
    return a.get(1, "default").value_or(Value::none());
  }
  a.check(name, {});
  if (name == "items") {
    ValueList out;
    for (const auto& [k, v] : d.entries()) out.push_back(Value::tuple({k, v}));
    return Value::list(std::move(out));
  }
  if (name == "keys" || name == "values") {
    ValueList out;
    for (const auto& [k, v] : d.entries()) out.push_back(name == "keys" ? k : v);
    return Value::list(std::move(out));
  }
  return self;  // copy: values are immutable
}

Value list_method(const Value& self, std::string_view name, const CallArgs& a) {
  const ValueList& items = self.list();
  if (name == "copy") return Value::list(items);
  const auto x = a.get(0, "value");
  if (!x) throw ValueError(std::string(name) + "() takes exactly one argument (0 given)");
  if (name == "count") {
    int64_t n = 0;
    for (const Value& v : items) n += equals(v, *x) ? 1 : 0;
    return Value(n);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (equals(items[i], *x)) return Value(static_cast<int64_t>(i));
  }
  throw ValueError(x->repr() + " is not in list");
}

std::string strftime_now(Evaluator& ev, const std::string& fmt) {
  std::tm tm{};
  if (ev.options().now) {
    tm = ev.options().now();
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  if (fmt.empty()) return "";
  for (size_t cap = 256; cap <= (size_t{1} << 20); cap *= 4) {
    std::string buf(cap, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return buf;
    }
  }
  return "";
}

}  // namespace

Value make_function(std::string name, std::function<Value(Evaluator&, const CallArgs&)> fn) {
  return Value::object(std::make_shared<FunctionObject>(std::move(name), std::move(fn)));
}

Value make_namespace(const Dict& attrs) {
  return Value::object(std::make_shared<NamespaceObject>(attrs));
}

std::optional<Value> builtin_method(const Value& self, std::string_view name) {
  const bool known =
      (self.is_string() && in(kStrMethods, name)) || (self.is_dict() && in(kDictMethods, name)) ||
      (self.is_list() && in(kListMethods, name) && !(self.is_tuple() && name == "copy"));
  if (known) return Value::object(std::make_shared<BoundMethod>(self, std::string(name)));
  if ((self.is_dict() && in(kDictUnsafe, name)) ||
      (self.is_list() && !self.is_tuple() && in(kListUnsafe, name))) {
    return Value::undefined("access to attribute '" + std::string(name) + "' of '" +
                            self.type_name() + "' object is unsafe.");
  }
  return std::nullopt;
}

void add_globals(Scope& scope) {
  scope.set(
      "range", make_function("range", [](Evaluator&, const CallArgs& a) -> Value {
        if (!a.kwargs.empty()) throw ValueError("range() takes no keyword arguments");
        if (a.args.empty() || a.args.size() > 3) {
          throw ValueError("range expected 1 to 3 arguments, got " + std::to_string(a.args.size()));
        }
        for (const Value& v : a.args) {
          if (!v.is_integral()) {
            throw ValueError("'" + v.type_name() + "' object cannot be interpreted as an integer");
          }
        }
        int64_t start = 0, stop, step = 1;
        if (a.args.size() == 1) {
          stop = a.args[0].as_int();
        } else {
          start = a.args[0].as_int();
          stop = a.args[1].as_int();
          if (a.args.size() == 3) step = a.args[2].as_int();
        }
        if (step == 0) throw ValueError("range() arg 3 must not be zero");
        const __int128 span = step > 0 ? (__int128)stop - start : (__int128)start - stop;
        const __int128 stride = step > 0 ? (__int128)step : -(__int128)step;
        const __int128 count = span > 0 ? (span + stride - 1) / stride : 0;
        if (count > 100000) {
          throw ValueError(
              "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        }
        ValueList out;
        for (__int128 k = 0; k < count; ++k) {
          out.emplace_back(static_cast<int64_t>(start + k * (__int128)step));
        }
        return Value::list(std::move(out));
      }));
  scope.set("dict", make_function("dict", [](Evaluator& ev, const CallArgs& a) -> Value {
              Dict d;
              if (a.args.size() > 1) throw ValueError("dict expected at most 1 argument");
              if (!a.args.empty()) {
                if (a.args[0].is_dict()) {
                  d = a.args[0].dict();
                } else {
                  for (const Value& pair : ev.iterate(a.args[0])) {
                    const ValueList kv = ev.iterate(pair);
                    if (kv.size() != 2)
                      throw ValueError("dictionary update sequence element has wrong length");
                    d.set(kv[0], kv[1]);
                  }
                }
              }
              for (const auto& [k, v] : a.kwargs) d.set(Value(k), v);
              return Value::dict(std::move(d));
            }));
  scope.set("namespace", make_function("namespace", [](Evaluator& ev, const CallArgs& a) -> Value {
              Dict d;
              if (a.args.size() > 1) throw ValueError("namespace expected at most 1 argument");
              if (!a.args.empty()) {
                if (!a.args[0].is_dict()) throw ValueError("namespace() argument must be a dict");
                d = a.args[0].dict();
              }
              for (const auto& [k, v] : a.kwargs) d.set(Value(k), v);
              Value ns = make_namespace(d);
              ev.track(ns.object_ptr());
              return ns;
            }));
  scope.set("raise_exception",
            make_function("raise_exception", [](Evaluator&, const CallArgs& a) -> Value {
              const std::string msg = a.args.empty() ? std::string() : a.args[0].to_str();
              throw PositionedError{a.pos, msg, true};
            }));
  scope.set("strftime_now",
            make_function("strftime_now", [](Evaluator& ev, const CallArgs& a) -> Value {
              a.check("strftime_now", {"format"});
              const auto fmt = a.get(0, "format");
              if (!fmt || !fmt->is_string())
                throw ValueError("strftime_now() needs a format string");
              return Value(strftime_now(ev, fmt->str()));
            }));
}

}  // namespace pagellm::jinja
