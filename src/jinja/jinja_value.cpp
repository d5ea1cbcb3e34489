#include "jinja/jinja_value.h"

#include <algorithm>
#include <cmath>

#include "jinja/jinja_pystr.h"

namespace pagellm::jinja {
namespace {

// The key a hashable value is filed under in a Dict; nullopt: unhashable.
std::optional<std::string> hash_key(const Value& v) {
  switch (v.kind()) {
    case Kind::kString:
      return std::string("s").append(v.str());
    case Kind::kBool:
    case Kind::kInt:
      return std::string("i").append(std::to_string(v.as_int()));
    case Kind::kFloat: {
      const double f = v.as_number();
      if (std::floor(f) == f && std::fabs(f) < 9.2e18) {
        return std::string("i").append(std::to_string(static_cast<int64_t>(f)));
      }
      return std::string("f").append(py::float_repr(f));
    }
    case Kind::kNone:
      return std::string("N");
    case Kind::kUndefined:
      return std::string("U");
    case Kind::kList: {
      if (!v.is_tuple()) return std::nullopt;
      std::string key = "t";
      for (const Value& item : v.list()) {
        auto k = hash_key(item);
        if (!k) return std::nullopt;
        key += std::to_string(k->size()) + ":" + *k;
      }
      return key;
    }
    case Kind::kDict:
      return std::nullopt;
    case Kind::kObject:
      return std::string("o").append(std::to_string(reinterpret_cast<uintptr_t>(&v.object())));
  }
  return std::nullopt;
}

const std::string& empty_string() {
  static const std::string empty;
  return empty;
}

}  // namespace

Value Value::undefined(std::string hint) {
  Value v;
  v.ptr_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(std::string s) : kind_(Kind::kString) {
  ptr_ = std::make_shared<const std::string>(std::move(s));
}

Value Value::safe(std::string s) {
  Value v(std::move(s));
  v.flag_ = true;
  return v;
}

namespace {

uint16_t container_depth(uint16_t deepest_item) {
  if (deepest_item + 1 > kMaxValueDepth) {
    throw ValueError("value nested too deeply (more than " + std::to_string(kMaxValueDepth) +
                     " levels of lists and dicts)");
  }
  return static_cast<uint16_t>(deepest_item + 1);
}

}  // namespace

Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  uint16_t deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.depth_);
  v.depth_ = container_depth(deepest);
  v.ptr_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.flag_ = true;
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  uint16_t deepest = 0;
  for (const auto& [k, item] : d.entries()) deepest = std::max({deepest, k.depth_, item.depth_});
  v.depth_ = container_depth(deepest);
  v.ptr_ = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::object(std::shared_ptr<Object> o) {
  Value v;
  v.kind_ = Kind::kObject;
  v.obj_ = std::move(o);
  return v;
}

const std::string& Value::str() const {
  return kind_ == Kind::kString ? *static_cast<const std::string*>(ptr_.get()) : empty_string();
}

const ValueList& Value::list() const {
  static const ValueList empty;
  return kind_ == Kind::kList ? *static_cast<const ValueList*>(ptr_.get()) : empty;
}

const Dict& Value::dict() const {
  static const Dict empty;
  return kind_ == Kind::kDict ? *static_cast<const Dict*>(ptr_.get()) : empty;
}

Object& Value::object() const {
  return *obj_;
}
const std::shared_ptr<Object>& Value::object_ptr() const {
  return obj_;
}

const std::string& Value::undefined_hint() const {
  if (kind_ == Kind::kUndefined && ptr_) return *static_cast<const std::string*>(ptr_.get());
  return empty_string();
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0.0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
      return !list().empty();
    case Kind::kDict:
      return !dict().empty();
    case Kind::kObject:
      return true;
  }
  return false;
}

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return py::float_repr(f_);
    case Kind::kString:
      return str();
    case Kind::kList: {
      std::string out = is_tuple() ? "(" : "[";
      const ValueList& items = list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        out += items[i].repr();
      }
      if (is_tuple() && items.size() == 1) out += ",";
      out += is_tuple() ? ")" : "]";
      return out;
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict().entries()) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::kObject:
      return obj_->repr();
  }
  return "";
}

std::string Value::repr() const {
  if (kind_ == Kind::kString) {
    return is_safe() ? "Markup(" + py::str_repr(str()) + ")" : py::str_repr(str());
  }
  if (kind_ == Kind::kUndefined) return "Undefined";
  return to_str();
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return flag_ ? "Markup" : "str";
    case Kind::kList:
      return flag_ ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kObject:
      return obj_->type_name();
  }
  return "object";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_number() == b.as_number();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const ValueList& x = a.list();
      const ValueList& y = b.list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* other = y.find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Kind::kObject:
      return &a.object() == &b.object();
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_number() < b.as_number();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const ValueList& x = a.list();
    const ValueList& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw ValueError("'<' not supported between instances of '" + a.type_name() + "' and '" +
                   b.type_name() + "'");
}

const Value* Dict::find(const Value& key) const {
  const auto k = hash_key(key);
  if (!k) return nullptr;
  const auto it = index_.find(*k);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* Dict::find(std::string_view key) const {
  std::string k = "s";
  k += key;
  const auto it = index_.find(k);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Dict::set(const Value& key, Value value) {
  const auto k = hash_key(key);
  if (!k) throw ValueError("unhashable type: '" + key.type_name() + "'");
  const auto it = index_.find(*k);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(*k, entries_.size());
  entries_.emplace_back(key, std::move(value));
}

std::optional<Value> CallArgs::get(size_t index, std::string_view name) const {
  if (index < args.size()) return args[index];
  for (const auto& [k, v] : kwargs) {
    if (k == name) return v;
  }
  return std::nullopt;
}

void CallArgs::check(std::string_view what, std::initializer_list<std::string_view> names) const {
  if (args.size() > names.size()) {
    throw ValueError(std::string(what) + "() takes at most " + std::to_string(names.size()) +
                     " argument(s) (" + std::to_string(args.size()) + " given)");
  }
  for (const auto& [k, v] : kwargs) {
    size_t i = 0;
    bool found = false;
    for (std::string_view n : names) {
      if (n == k) {
        if (i < args.size()) {
          throw ValueError(std::string(what) + "() got multiple values for argument '" + k + "'");
        }
        found = true;
        break;
      }
      ++i;
    }
    if (!found) {
      throw ValueError(std::string(what) + "() got an unexpected keyword argument '" + k + "'");
    }
  }
}

Value Object::call(Evaluator&, const CallArgs&) {
  throw ValueError("'" + type_name() + "' object is not callable");
}

std::string Object::repr() const {
  return std::string("<").append(type_name()).append(" object>");
}

}  // namespace pagellm::jinja
