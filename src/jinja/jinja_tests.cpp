#include "jinja/jinja_tests.h"

#include <unordered_map>

#include "jinja/jinja_filters.h"
#include "jinja/jinja_pystr.h"

namespace pagellm::jinja {
namespace {

using TestFn = bool (*)(Evaluator&, const Value&, const CallArgs&);

const Value& arg0(const CallArgs& a, const char* test) {
  if (a.args.empty()) throw ValueError(std::string("the '") + test + "' test needs an argument");
  return a.args[0];
}

// boolean undefined none integer float number string mapping escaped: one
// Value kind predicate each.
template <bool (Value::*kIs)() const>
bool t_kind(Evaluator&, const Value& v, const CallArgs&) {
  return (v.*kIs)();
}
constexpr TestFn t_boolean = t_kind<&Value::is_bool>;
constexpr TestFn t_undefined = t_kind<&Value::is_undefined>;
constexpr TestFn t_none = t_kind<&Value::is_none>;
constexpr TestFn t_integer = t_kind<&Value::is_int>;
constexpr TestFn t_float = t_kind<&Value::is_float>;
constexpr TestFn t_number = t_kind<&Value::is_number>;
constexpr TestFn t_string = t_kind<&Value::is_string>;
constexpr TestFn t_mapping = t_kind<&Value::is_dict>;
constexpr TestFn t_escaped = t_kind<&Value::is_safe>;

// Jinja2's Undefined has __call__ (it raises), so it counts as callable.
bool t_callable(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_undefined() || (v.is_object() && v.object().callable());
}
bool t_defined(Evaluator&, const Value& v, const CallArgs&) {
  return !v.is_undefined();
}
bool t_true(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_bool() && v.as_bool();
}
bool t_false(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_bool() && !v.as_bool();
}

bool t_iterable(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() ||
         (v.is_object() && v.object().type_name() == "LoopContext");
}
bool t_sequence(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}

bool case_test(const Value& v, bool want_lower) {
  bool cased = false;
  for (char32_t c : py::decode(v.to_str())) {
    const bool is_lower = py::to_upper(c) != c || c == 0xDF;
    const bool is_upper = py::to_lower(c) != c;
    if (want_lower ? is_upper : is_lower) return false;
    cased = cased || is_lower || is_upper;
  }
  return cased;
}
bool t_lower(Evaluator&, const Value& v, const CallArgs&) {
  return case_test(v, true);
}
bool t_upper(Evaluator&, const Value& v, const CallArgs&) {
  return case_test(v, false);
}

bool t_divisibleby(Evaluator& ev, const Value& v, const CallArgs& a) {
  const Value r = ev.binary(BinaryOp::kMod, v, arg0(a, "divisibleby"));
  return r.as_number() == 0;
}
bool t_even(Evaluator& ev, const Value& v, const CallArgs&) {
  return ev.binary(BinaryOp::kMod, v, Value(int64_t{2})).as_number() == 0;
}
bool t_odd(Evaluator& ev, const Value& v, const CallArgs&) {
  return ev.binary(BinaryOp::kMod, v, Value(int64_t{2})).as_number() == 1;
}

// eq, ne, lt, le, gt, ge, in (and their aliases): the comparison operators.
template <CompareOp op>
bool t_compare(Evaluator& ev, const Value& v, const CallArgs& a) {
  static_assert(op != CompareOp::kNotIn);
  static constexpr const char* kNames[] = {"eq", "ne", "lt", "le", "gt", "ge", "in"};
  return ev.compare(op, v, arg0(a, kNames[static_cast<int>(op)]));
}
constexpr TestFn t_eq = t_compare<CompareOp::kEq>;
constexpr TestFn t_ne = t_compare<CompareOp::kNe>;
constexpr TestFn t_lt = t_compare<CompareOp::kLt>;
constexpr TestFn t_le = t_compare<CompareOp::kLe>;
constexpr TestFn t_gt = t_compare<CompareOp::kGt>;
constexpr TestFn t_ge = t_compare<CompareOp::kGe>;
constexpr TestFn t_in = t_compare<CompareOp::kIn>;

// Python's `is`: the same object for containers and objects; equal for the
// immutable scalars CPython interns (None, booleans) and equal-kind values.
bool t_sameas(Evaluator&, const Value& v, const CallArgs& a) {
  const Value& o = arg0(a, "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::kList:
      return &v.list() == &o.list();
    case Kind::kDict:
      return &v.dict() == &o.dict();
    case Kind::kObject:
      return &v.object() == &o.object();
    case Kind::kString:
      return &v.str() == &o.str() || v.str() == o.str();
    default:
      return equals(v, o);
  }
}

bool t_filter(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_string() && has_filter(v.str());
}
bool t_test(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_string() && has_test(v.str());
}

const std::unordered_map<std::string_view, TestFn>& registry() {
  static const std::unordered_map<std::string_view, TestFn> tests = {
      {"boolean", t_boolean},
      {"callable", t_callable},
      {"defined", t_defined},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"escaped", t_escaped},
      {"even", t_even},
      {"false", t_false},
      {"filter", t_filter},
      {"float", t_float},
      {"ge", t_ge},
      {">=", t_ge},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"in", t_in},
      {"integer", t_integer},
      {"iterable", t_iterable},
      {"le", t_le},
      {"<=", t_le},
      {"lower", t_lower},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"mapping", t_mapping},
      {"ne", t_ne},
      {"!=", t_ne},
      {"none", t_none},
      {"number", t_number},
      {"odd", t_odd},
      {"sameas", t_sameas},
      {"sequence", t_sequence},
      {"string", t_string},
      {"test", t_test},
      {"true", t_true},
      {"undefined", t_undefined},
      {"upper", t_upper},
  };
  return tests;
}

}  // namespace

bool has_test(std::string_view name) {
  return registry().count(name) > 0;
}

bool apply_test(Evaluator& ev, std::string_view name, const Value& input, const CallArgs& args) {
  const auto it = registry().find(name);
  if (it == registry().end()) throw ValueError("no test named '" + std::string(name) + "'");
  return it->second(ev, input, args);
}

}  // namespace pagellm::jinja
