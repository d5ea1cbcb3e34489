// Values of the Jinja engine, modelled on the Python objects Jinja2 renders:
// Undefined, None, bool, int (64-bit here), float, str (UTF-8; may be marked
// "safe", Jinja2's Markup), list, tuple, dict (insertion-ordered), and objects
// (namespaces, loop contexts, functions, macros, bound methods).
//
// Lists, tuples and dicts are immutable once built (as in Jinja2's immutable
// sandbox, which Hugging Face renders with), so copies share storage; only
// namespace objects change, through `{% set ns.attr = ... %}`.
//
// str(), repr(), truthiness, equality and ordering follow Python.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "jinja/jinja_error.h"

namespace pagellm::jinja {

class Value;
class Dict;
class Object;
class Evaluator;
using ValueList = std::vector<Value>;

// Thrown by value operations (a type mismatch, an unhashable key, ...); the
// evaluator adds the template position.
class ValueError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kDict,
  kObject
};

// Deepest nesting of lists and dicts in a value (JSON input or built by a
// template); deeper throws ValueError, so printing, comparing and freeing
// values never recurse without bound.
inline constexpr int kMaxValueDepth = 512;

class Value {
 public:
  Value() = default;  // Undefined
  // Undefined, remembering why ("'x' is undefined") for the error when it is used.
  static Value undefined(std::string hint);
  static Value none();
  Value(bool b) : kind_(Kind::kBool), b_(b) {}
  Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
  Value(int i) : kind_(Kind::kInt), i_(i) {}
  Value(double f) : kind_(Kind::kFloat), f_(f) {}
  Value(std::string s);
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  // A string marked safe (Jinja2 Markup): `+` with a plain string escapes the other side.
  static Value safe(std::string s);
  static Value list(ValueList items);
  static Value tuple(ValueList items);
  static Value dict(Dict d);
  static Value object(std::shared_ptr<Object> o);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }  // not bool
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python: bool is an int
  bool is_integral() const { return is_bool() || is_int(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_safe() const { return kind_ == Kind::kString && flag_; }
  bool is_list() const { return kind_ == Kind::kList; }  // list or tuple
  bool is_tuple() const { return kind_ == Kind::kList && flag_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return is_bool() ? (b_ ? 1 : 0) : i_; }  // bool or int
  double as_number() const { return is_float() ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const;
  const ValueList& list() const;
  const Dict& dict() const;
  Object& object() const;
  const std::shared_ptr<Object>& object_ptr() const;
  const std::string& undefined_hint() const;

  bool truthy() const;
  // Python str(): strings as they are, None "None", True "True", containers as repr;
  // Undefined "" (Jinja2's default Undefined).
  std::string to_str() const;
  std::string repr() const;
  // Python's type name ("str", "int", "list", "dict", "NoneType", "Undefined", ...).
  std::string type_name() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool flag_ = false;   // tuple (lists), safe (strings)
  uint16_t depth_ = 0;  // lists and dicts: 1 + the deepest item's depth
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  // string, list, dict or Undefined hint (const), or Object.
  std::shared_ptr<const void> ptr_;
  std::shared_ptr<Object> obj_;
};

// Python ==: numbers by value (True == 1 == 1.0), containers deeply, Undefined
// equal only to Undefined.
bool equals(const Value& a, const Value& b);
// Python <: numbers, strings (code point order), lists/tuples lexicographically;
// anything else throws ValueError("'<' not supported between ...").
bool less(const Value& a, const Value& b);

// An insertion-ordered dict. Keys are hashable values (str, numbers, None, tuples
// of those); 1, 1.0 and True are the same key, as in Python.
class Dict {
 public:
  using Entry = std::pair<Value, Value>;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const Value* find(const std::string& key) const { return find(std::string_view(key)); }
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  // Replaces the value of an existing key (keeping its place) or appends.
  // Throws ValueError("unhashable type: 'list'").
  void set(const Value& key, Value value);
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;  // hash key -> entry
};

// Positional and keyword arguments of a call.
struct CallArgs {
  ValueList args;
  std::vector<std::pair<std::string, Value>> kwargs;
  SourcePos pos;

  // The positional argument at `index`, else the keyword argument `name`, else nullopt.
  std::optional<Value> get(size_t index, std::string_view name) const;
  // Throws ValueError unless every argument fits a parameter of `names`
  // (positional first), for a callable called `what`.
  void check(std::string_view what, std::initializer_list<std::string_view> names) const;
};

// Namespaces, loop contexts, functions, macros, bound methods.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  // Attribute look-up; nullopt: no such attribute.
  virtual std::optional<Value> attr(std::string_view name) const { return std::nullopt; }
  // Attribute assignment; false: not allowed on this object.
  virtual bool set_attr(std::string_view name, Value value) { return false; }
  virtual bool callable() const { return false; }
  virtual Value call(Evaluator& ev, const CallArgs& args);
  virtual std::string repr() const;
  // Drops the values this object holds, breaking reference cycles (a
  // namespace holding itself) when a render ends.
  virtual void release() {}
};

}  // namespace pagellm::jinja
