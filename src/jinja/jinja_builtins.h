// Built-ins of the Jinja engine: the global functions templates call and the
// methods of Python's str, dict and list that the sandbox allows.
//
// Globals: range([start,] stop[, step]) (at most 100000 items, as Jinja2's
// sandbox), dict(**kw), namespace([dict], **kw), raise_exception(msg) (Hugging
// Face: the template refuses its input), strftime_now(format) (Hugging Face:
// the current time, formatted as C strftime does).
//
// Methods: str: strip lstrip rstrip split rsplit splitlines startswith endswith
// upper lower title capitalize swapcase casefold replace find rfind index rindex
// count join isdigit isnumeric isdecimal isalpha isalnum isspace islower isupper
// format zfill center ljust rjust removeprefix removesuffix partition rpartition;
// dict: get items keys values copy; list/tuple: index count copy.
// Methods that modify (list.append, dict.update, ...) are refused, as in the
// immutable sandbox.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "jinja/jinja_eval.h"
#include "jinja/jinja_value.h"

namespace pagellm::jinja {

// Adds the global functions to `scope`.
void add_globals(Scope& scope);

// `self.name` for a method of a built-in type, bound to `self`; nullopt when
// the type has no such method. A modifying method gives an Undefined that
// fails when used.
std::optional<Value> builtin_method(const Value& self, std::string_view name);

// A namespace() object holding `attrs`.
Value make_namespace(const Dict& attrs);

// A built-in function object.
Value make_function(std::string name, std::function<Value(Evaluator&, const CallArgs&)> fn);

}  // namespace pagellm::jinja
