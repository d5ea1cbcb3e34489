// Expressions: names, attribute and item access, calls, operators, literals.
#include <cmath>
#include <limits>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_eval.h"
#include "jinja/jinja_filters.h"
#include "jinja/jinja_format.h"
#include "jinja/jinja_pystr.h"
#include "jinja/jinja_tests.h"

namespace pagellm::jinja {
namespace {

[[noreturn]] void fail_undefined(const Value& u) {
  throw ValueError(u.undefined_hint().empty() ? "an undefined value was used" : u.undefined_hint());
}

// Python's object_type_repr: "None", or "'str object'" style.
std::string no_attribute(const Value& obj, std::string_view name) {
  std::string out = obj.is_none() ? std::string("'None'")
                                  : std::string("'").append(obj.type_name()).append(" object'");
  return out.append(" has no attribute '").append(name).append("'");
}

std::string no_element(const Value& obj, const Value& key) {
  if (key.is_string()) return no_attribute(obj, key.str());
  const std::string owner = obj.is_none() ? "None" : obj.type_name() + " object";
  return owner + " has no element " + key.repr();
}

[[noreturn]] void overflow() {
  throw ValueError("integer overflow (beyond 64 bits)");
}

Value py_floordiv(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    const int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) throw ValueError("integer division or modulo by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow();
    int64_t q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) --q;
    return Value(q);
  }
  const double x = a.as_number(), y = b.as_number();
  if (y == 0) throw ValueError("float floor division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) div -= 1.0;
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  return Value(floordiv);
}

Value py_mod(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    const int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) throw ValueError("integer division or modulo by zero");
    if (y == -1) return Value(int64_t{0});
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value(r);
  }
  const double x = a.as_number(), y = b.as_number();
  if (y == 0) throw ValueError("float modulo");
  double r = std::fmod(x, y);
  if (r != 0) {
    if ((y < 0) != (r < 0)) r += y;
  } else {
    r = std::copysign(0.0, y);
  }
  return Value(r);
}

Value py_pow(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral() && b.as_int() >= 0) {
    int64_t base = a.as_int(), e = b.as_int(), result = 1;
    while (e > 0) {
      if (e & 1) {
        if (__builtin_mul_overflow(result, base, &result)) overflow();
      }
      e >>= 1;
      if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
    }
    return Value(result);
  }
  const double x = a.as_number(), y = b.as_number();
  if (x == 0 && y < 0) throw ValueError("0.0 cannot be raised to a negative power");
  if (x < 0 && std::floor(y) != y) {
    throw ValueError("a negative number raised to a fractional power is complex");
  }
  return Value(std::pow(x, y));
}

std::string unsupported(const char* op, const Value& a, const Value& b) {
  return std::string("unsupported operand type(s) for ") + op + ": '" + a.type_name() + "' and '" +
         b.type_name() + "'";
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!item.is_string()) {
        throw ValueError("'in <string>' requires string as left operand, not " + item.type_name());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : container.list()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Kind::kDict:
      return container.dict().find(item) != nullptr;
    default:
      throw ValueError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

std::optional<int64_t> slice_bound(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!v.is_integral()) {
    throw ValueError("slice indices must be integers or None");
  }
  return v.as_int();
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void Evaluator::check_size(size_t bytes, const char* what) const {
  if (bytes > opts_.limits.max_bytes) {
    throw ValueError(std::string(what) + " would be too large (" + std::to_string(bytes) +
                     "; the limit is " + std::to_string(opts_.limits.max_bytes) + ")");
  }
}

Value Evaluator::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  try {
    check_stack();
    Value v = eval_inner(e, scope);
    if (v.is_string()) check_size(v.str().size(), "a string");
    return v;
  } catch (const ValueError& err) {
    throw PositionedError{e.pos, err.what()};
  } catch (const std::logic_error& err) {
    throw PositionedError{e.pos, err.what()};
  }
}

Value Evaluator::eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope) {
  switch (e.kind) {
    case ExprKind::kConst:
      return e.as<ConstExpr>().value;
    case ExprKind::kName: {
      const std::string& name = e.as<NameExpr>().name;
      if (const Value* v = scope->find(name)) return *v;
      return Value::undefined("'" + name + "' is undefined");
    }
    case ExprKind::kAttr: {
      const auto& a = e.as<AttrExpr>();
      return getattr(eval(*a.obj, scope), a.name);
    }
    case ExprKind::kItem: {
      const auto& i = e.as<ItemExpr>();
      Value obj = eval(*i.obj, scope);
      return getitem(obj, eval(*i.key, scope));
    }
    case ExprKind::kSlice:
      return eval_slice(e.as<SliceExpr>(), scope);
    case ExprKind::kCall:
      return eval_call(e.as<CallExpr>(), scope);
    case ExprKind::kFilter:
      return eval_filter(e.as<FilterExpr>(), nullptr, scope);
    case ExprKind::kTest: {
      const auto& t = e.as<TestExpr>();
      Value input = eval(*t.input, scope);
      CallArgs args = eval_args(t.args, t.pos, scope);
      return Value(apply_test(*this, t.name, input, args));
    }
    case ExprKind::kUnary: {
      const auto& u = e.as<UnaryExpr>();
      Value v = eval(*u.operand, scope);
      if (u.op == UnaryOp::kNot) return Value(!v.truthy());
      if (v.is_undefined()) fail_undefined(v);
      const char* op = u.op == UnaryOp::kNeg ? "-" : "+";
      if (v.is_float()) return Value(u.op == UnaryOp::kNeg ? -v.as_number() : v.as_number());
      if (v.is_integral()) {
        if (u.op == UnaryOp::kPos) return Value(v.as_int());
        if (v.as_int() == std::numeric_limits<int64_t>::min()) overflow();
        return Value(-v.as_int());
      }
      throw ValueError(std::string("bad operand type for unary ") + op + ": '" + v.type_name() +
                       "'");
    }
    case ExprKind::kBinary: {
      const auto& b = e.as<BinaryExpr>();
      Value left = eval(*b.left, scope);
      if (b.op == BinaryOp::kAnd) return left.truthy() ? eval(*b.right, scope) : left;
      if (b.op == BinaryOp::kOr) return left.truthy() ? left : eval(*b.right, scope);
      return binary(b.op, left, eval(*b.right, scope));
    }
    case ExprKind::kCompare: {
      const auto& c = e.as<CompareExpr>();
      Value left = eval(*c.first, scope);
      for (const auto& [op, expr] : c.rest) {
        Value right = eval(*expr, scope);
        if (!compare(op, left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::kCond: {
      const auto& c = e.as<CondExpr>();
      if (eval(*c.test, scope).truthy()) return eval(*c.then, scope);
      if (c.otherwise) return eval(*c.otherwise, scope);
      return Value::undefined(
          "the inline if-expression evaluated to false and no else section was defined");
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      ValueList items;
      for (const auto& item : e.as<ListExpr>().items) items.push_back(eval(*item, scope));
      return e.kind == ExprKind::kList ? Value::list(std::move(items))
                                       : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Dict d;
      for (const auto& [k, v] : e.as<DictExpr>().items) {
        Value key = eval(*k, scope);
        d.set(key, eval(*v, scope));
      }
      return Value::dict(std::move(d));
    }
  }
  throw ValueError("internal error: unknown expression");
}

Value Evaluator::getattr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      fail_undefined(obj);
    case Kind::kObject:
      if (auto v = obj.object().attr(name)) return *v;
      return Value::undefined(no_attribute(obj, name));
    case Kind::kDict:
      if (auto m = builtin_method(obj, name)) return *m;
      if (const Value* v = obj.dict().find(name)) return *v;
      return Value::undefined(no_attribute(obj, name));
    default:
      if (auto m = builtin_method(obj, name)) return *m;
      return Value::undefined(no_attribute(obj, name));
  }
}

Value Evaluator::getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      fail_undefined(obj);
    case Kind::kDict:
      if (const Value* v = obj.dict().find(key)) return *v;
      break;
    case Kind::kList:
      if (key.is_integral()) {
        const ValueList& items = obj.list();
        int64_t i = key.as_int();
        const auto n = static_cast<int64_t>(items.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return items[i];
      }
      break;
    case Kind::kString:
      if (key.is_integral()) {
        const std::u32string text = py::decode(obj.str());
        int64_t i = key.as_int();
        const auto n = static_cast<int64_t>(text.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value(py::encode(std::u32string_view(&text[i], 1)));
      }
      break;
    default:
      break;
  }
  if (key.is_string()) {
    if (obj.is_object()) {
      if (auto v = obj.object().attr(key.str())) return *v;
    } else if (auto m = builtin_method(obj, key.str())) {
      return *m;
    }
  }
  return Value::undefined(no_element(obj, key));
}

Value Evaluator::call(const Value& callee, const CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.is_object() && callee.object().callable()) {
    return callee.object_ptr()->call(*this, args);
  }
  throw ValueError("'" + callee.type_name() + "' object is not callable");
}

ValueList Evaluator::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return {};
    case Kind::kList:
      return v.list();
    case Kind::kDict: {
      ValueList keys;
      keys.reserve(v.dict().size());
      for (const auto& [k, val] : v.dict().entries()) keys.push_back(k);
      return keys;
    }
    case Kind::kString: {
      ValueList chars;
      for (char32_t c : py::decode(v.str()))
        chars.emplace_back(py::encode(std::u32string_view(&c, 1)));
      return chars;
    }
    default:
      throw ValueError("'" + v.type_name() + "' object is not iterable");
  }
}

Value Evaluator::binary(BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::kConcat) {
    std::string s = a.to_str();
    const std::string t = b.to_str();
    check_size(s.size() + t.size(), "a string");
    return Value(s + t);
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = a.is_integral() && b.is_integral();
  switch (op) {
    case BinaryOp::kAdd:
      if (ints) {
        int64_t r;
        if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value(r);
      }
      if (nums) return Value(a.as_number() + b.as_number());
      if (a.is_string() && b.is_string()) {
        check_size(a.str().size() + b.str().size(), "a string");
        if (a.is_safe() || b.is_safe()) {
          return Value::safe((a.is_safe() ? a.str() : html_escape(a.str())) +
                             (b.is_safe() ? b.str() : html_escape(b.str())));
        }
        return Value(a.str() + b.str());
      }
      if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        check_size(a.list().size() + b.list().size(), "a list");
        ValueList items = a.list();
        items.insert(items.end(), b.list().begin(), b.list().end());
        return a.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      if (a.is_string() || a.is_list()) {
        throw ValueError("can only concatenate " + a.type_name() + " (not \"" + b.type_name() +
                         "\") to " + a.type_name());
      }
      throw ValueError(unsupported("+", a, b));
    case BinaryOp::kSub:
      if (ints) {
        int64_t r;
        if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value(r);
      }
      if (nums) return Value(a.as_number() - b.as_number());
      throw ValueError(unsupported("-", a, b));
    case BinaryOp::kMul: {
      if (ints) {
        int64_t r;
        if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value(r);
      }
      if (nums) return Value(a.as_number() * b.as_number());
      const Value* seq = (a.is_string() || a.is_list()) && b.is_integral()   ? &a
                         : (b.is_string() || b.is_list()) && a.is_integral() ? &b
                                                                             : nullptr;
      if (!seq)
        throw ValueError("can't multiply sequence by non-int of type '" +
                         (a.is_integral() || a.is_string() || a.is_list() ? b : a).type_name() +
                         "'");
      const int64_t n = std::max<int64_t>(0, (seq == &a ? b : a).as_int());
      if (seq->is_string()) {
        const size_t len = seq->str().size();
        if (len > 0 && static_cast<uint64_t>(n) > opts_.limits.max_bytes / len) {
          check_size(opts_.limits.max_bytes + 1, "a string");
        }
        std::string out;
        out.reserve(len * n);
        for (int64_t i = 0; i < n; ++i) out += seq->str();
        return Value(std::move(out));
      }
      const size_t len = seq->list().size();
      if (len > 0 && static_cast<uint64_t>(n) > opts_.limits.max_bytes / len) {
        check_size(opts_.limits.max_bytes + 1, "a list");
      }
      ValueList items;
      for (int64_t i = 0; i < n; ++i)
        items.insert(items.end(), seq->list().begin(), seq->list().end());
      return seq->is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    case BinaryOp::kDiv:
      if (nums) {
        if (b.as_number() == 0) throw ValueError("division by zero");
        return Value(a.as_number() / b.as_number());
      }
      throw ValueError(unsupported("/", a, b));
    case BinaryOp::kFloorDiv:
      if (nums) return py_floordiv(a, b);
      throw ValueError(unsupported("//", a, b));
    case BinaryOp::kMod:
      if (nums) return py_mod(a, b);
      if (a.is_string()) return Value(percent_format(*this, a.str(), b));
      throw ValueError(unsupported("%", a, b));
    case BinaryOp::kPow:
      if (nums) return py_pow(a, b);
      throw ValueError(unsupported("** or pow()", a, b));
    default:
      break;
  }
  throw ValueError("internal error: unknown operator");
}

bool Evaluator::compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq:
      return equals(a, b);
    case CompareOp::kNe:
      return !equals(a, b);
    case CompareOp::kIn:
      return contains(b, a);
    case CompareOp::kNotIn:
      return !contains(b, a);
    default:
      break;
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const char* name = op == CompareOp::kLt   ? "<"
                     : op == CompareOp::kLe ? "<="
                     : op == CompareOp::kGt ? ">"
                                            : ">=";
  try {
    switch (op) {
      case CompareOp::kLt:
        return less(a, b);
      case CompareOp::kGt:
        return less(b, a);
      case CompareOp::kLe:
        return less(a, b) || equals(a, b);
      default:
        return less(b, a) || equals(a, b);
    }
  } catch (const ValueError&) {
    throw ValueError(std::string("'") + name + "' not supported between instances of '" +
                     a.type_name() + "' and '" + b.type_name() + "'");
  }
}

Value Evaluator::eval_slice(const SliceExpr& s, const std::shared_ptr<Scope>& scope) {
  Value obj = eval(*s.obj, scope);
  const std::optional<int64_t> start = s.start ? slice_bound(eval(*s.start, scope)) : std::nullopt;
  const std::optional<int64_t> stop = s.stop ? slice_bound(eval(*s.stop, scope)) : std::nullopt;
  const std::optional<int64_t> step_v = s.step ? slice_bound(eval(*s.step, scope)) : std::nullopt;
  const int64_t step = step_v.value_or(1);
  if (step == 0) throw ValueError("slice step cannot be zero");
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_string()) return Value(py::slice(obj.str(), start, stop, step));
  if (obj.is_list()) {
    const ValueList& items = obj.list();
    ValueList out;
    for (int64_t i : py::slice_indices(static_cast<int64_t>(items.size()), start, stop, step)) {
      out.push_back(items[i]);
    }
    return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  throw ValueError("'" + obj.type_name() + "' object is not subscriptable");
}

CallArgs Evaluator::eval_args(const ArgList& args, SourcePos pos,
                              const std::shared_ptr<Scope>& scope) {
  CallArgs out;
  out.pos = pos;
  for (const auto& a : args.positional) out.args.push_back(eval(*a, scope));
  for (const auto& [k, v] : args.keyword) out.kwargs.emplace_back(k, eval(*v, scope));
  return out;
}

Value Evaluator::eval_call(const CallExpr& c, const std::shared_ptr<Scope>& scope) {
  Value callee = eval(*c.callee, scope);
  CallArgs args = eval_args(c.args, c.pos, scope);
  return call(callee, args);
}

Value Evaluator::eval_filter(const FilterExpr& f, const Value* block_text,
                             const std::shared_ptr<Scope>& scope) {
  try {
    Value input;
    if (f.input) {
      if (block_text && f.input->kind == ExprKind::kFilter) {
        input = eval_filter(f.input->as<FilterExpr>(), block_text, scope);
      } else {
        input = eval(*f.input, scope);
      }
    } else if (block_text) {
      input = *block_text;
    }
    CallArgs args = eval_args(f.args, f.pos, scope);
    return apply_filter(*this, f.name, input, args);
  } catch (const ValueError& err) {
    throw PositionedError{f.pos, err.what()};
  } catch (const std::logic_error& err) {
    throw PositionedError{f.pos, err.what()};
  }
}

}  // namespace pagellm::jinja
