// Jinja2's built-in tests (`value is name(args)`):
//
// boolean callable defined divisibleby eq equalto == escaped even false filter
// float ge >= gt greaterthan > in integer iterable le <= lower lt lessthan <
// mapping ne != none number odd sameas sequence string test true undefined upper
//
// Python's view of types: a bool is a number (and not an integer for
// `integer`); Undefined is iterable and a sequence; a string is iterable and a
// sequence; only dicts are mappings.
#pragma once

#include <string_view>

#include "jinja/jinja_eval.h"
#include "jinja/jinja_value.h"

namespace pagellm::jinja {

bool has_test(std::string_view name);
// Throws ValueError for bad arguments.
bool apply_test(Evaluator& ev, std::string_view name, const Value& input, const CallArgs& args);

}  // namespace pagellm::jinja
