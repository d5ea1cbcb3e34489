// Python string formatting for the Jinja engine: `fmt % args` (and the
// `format` filter) and str.format.
//
// percent_format: %s %r %a %d %i %u %f %F %e %E %g %G %x %X %o %c %%, with
// %(key)s taking values from a dict, flags - + space # 0, a width and a
// precision ('*' is not supported). `args` is a tuple of values, a dict (for
// %(key)s), or a single value.
//
// brace_format: {} {0} {name} fields, .attr and [key] after the name, !s / !r
// conversions, and format specs [[fill]align][sign][#][0][width][,][.precision]
// [type] for strings (s), integers (d x X o b c) and floats (f F e E g G %).
// Errors throw ValueError with Python's message.
#pragma once

#include <string>
#include <string_view>

#include "jinja/jinja_eval.h"
#include "jinja/jinja_value.h"

namespace pagellm::jinja {

std::string percent_format(Evaluator& ev, std::string_view fmt, const Value& args);
std::string brace_format(Evaluator& ev, std::string_view fmt, const CallArgs& args);

}  // namespace pagellm::jinja
