// Bad templates: every syntax error, unknown construct and runtime error is a
// TemplateError naming line:column, never a crash or a hang.
#include <gtest/gtest.h>

#include <string>

#include "jinja/jinja_template.h"

namespace pagellm::jinja {
namespace {

struct BadCase {
  const char* source;
  int line;
  int column;
  const char* message;  // a part of the message
};

void expect_error(const BadCase& c, bool at_render) {
  SCOPED_TRACE(c.source);
  try {
    const Template t = Template::parse(c.source, "bad.jinja");
    if (!at_render) {
      ADD_FAILURE() << "parsed";
      return;
    }
    t.render({});
    ADD_FAILURE() << "rendered";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.template_name(), "bad.jinja");
    EXPECT_EQ(e.pos().line, c.line) << e.what();
    EXPECT_EQ(e.pos().column, c.column) << e.what();
    EXPECT_NE(e.message().find(c.message), std::string::npos) << e.what();
    const std::string prefix =
        "bad.jinja:" + std::to_string(c.line) + ":" + std::to_string(c.column) + ": ";
    EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
  }
}

TEST(JinjaErrors, SyntaxErrorsNameTheirPosition) {
  const BadCase cases[] = {
      {"{% for x in xs %}\n  {{ x }}\n", 1, 4, "'for' block opened here needs 'endfor' or 'else'"},
      {"{% if a %}x{% elif b %}", 1, 4, "'if' block opened here needs"},
      {"{% if a %}{% for x in y %}{% endif %}", 1, 30, "unknown tag 'endif'"},
      {"{% macro m() %}", 1, 4, "'macro' block opened here needs 'endmacro'"},
      {"{% set x %}abc", 1, 4, "'set' block opened here needs 'endset'"},
      {"{% filter upper %}", 1, 4, "needs 'endfilter'"},
      {"text\n{% endfor %}", 2, 4, "unknown tag 'endfor'"},
      {"{% frobnicate %}", 1, 4, "unknown tag 'frobnicate'"},
      {"{% include 'x.html' %}", 1, 4, "'include' tag is not supported"},
      {"{% extends 'base' %}", 1, 4, "'extends' tag is not supported"},
      {"{% call m() %}{% endcall %}", 1, 4, "'call' tag is not supported"},
      {"ab\n  {{ x | nosuchfilter }}", 2, 10, "no filter named 'nosuchfilter'"},
      {"{{ x is nosuchtest }}", 1, 9, "no test named 'nosuchtest'"},
      {"{{ x", 1, 1, "missing '}}'"},
      {"{% if x", 1, 1, "missing '%}'"},
      {"{# never closed", 1, 1, "unclosed comment"},
      {"{% raw %}abc", 1, 1, "missing '{% endraw %}'"},
      {"{{ 'abc }}", 1, 4, "unterminated string"},
      {"{{ (1 + 2 }}", 1, 11, "unexpected '}', expected ')'"},
      {"{{ (1 + 2", 1, 4, "unclosed '(' in tag"},
      {"{{ 1 + 2) }}", 1, 9, "unexpected ')'"},
      {"{{ [1, 2 }}", 1, 10, "unexpected '}', expected ']'"},
      {"{{ 1 + }}", 1, 8, "unexpected end of print statement"},
      {"{{ }}", 1, 4, "expected an expression"},
      {"{{ a b }}", 1, 6, "expected end of print statement '}}', got 'b'"},
      {"{{ 1 $ 2 }}", 1, 6, "unexpected character '$'"},
      {"{% for in xs %}{% endfor %}", 1, 8, "expected a name to assign to"},
      {"{% for x xs %}{% endfor %}", 1, 10, "expected 'in'"},
      {"{% set = 1 %}", 1, 8, "expected a name to assign to"},
      {"{% set true = 1 %}", 1, 8, "cannot assign to 'true'"},
      {"{% break %}", 1, 4, "'break' outside of a for loop"},
      {"{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", 1, 35,
       "'continue' outside of a for loop"},
      {"{% macro m(a=1, b) %}{% endmacro %}", 1, 17, "non-default parameter 'b'"},
      {"{{ f(a=1, 2) }}", 1, 11, "positional argument follows keyword argument"},
      {"{{ f(*args) }}", 1, 6, "*args and **kwargs are not supported"},
      {"{{ x.}}", 1, 6, "expected a name or number after '.'"},
      {"{{ 'a' 'b' is is }}", 1, 15, "no test named 'is'"},
      {"{{ 'a' is }}", 1, 11, "expected test name"},
      {"{% %}", 1, 4, "tag name expected"},
      {"{{ '\\x4' }}", 1, 5, "truncated \\x escape"},
  };
  for (const BadCase& c : cases) expect_error(c, false);
}

TEST(JinjaErrors, RuntimeErrorsNameTheirPosition) {
  const BadCase cases[] = {
      {"\n\n   {{ missing.attr }}", 3, 14, "'missing' is undefined"},
      {"{{ 1 + 'a' }}", 1, 6, "unsupported operand type(s) for +: 'int' and 'str'"},
      {"{{ 'a' + 1 }}", 1, 8, "can only concatenate str (not \"int\") to str"},
      {"{{ 1 // 0 }}", 1, 6, "integer division or modulo by zero"},
      {"{{ [].append(1) }}", 1, 13, "access to attribute 'append' of 'list' object is unsafe."},
      {"{{ nofn() }}", 1, 4, "'nofn' is undefined"},
      {"{{ 'a' < 1 }}", 1, 4, "'<' not supported between instances of 'str' and 'int'"},
      {"{% for a, b in [1] %}{% endfor %}", 1, 8, "cannot unpack non-iterable int object"},
      {"{% set a, b = [1, 2, 3] %}", 1, 8, "too many values to unpack (expected 2)"},
      {"{{ range(1000000) }}", 1, 4, "Range too big"},
      {"{{ [1] | items }}", 1, 10, "Can only get item pairs from a mapping."},
      {"{% set x = 1 %}{% set x.y = 2 %}", 1, 23,
       "cannot assign attribute on non-namespace object"},
      {"{{ 5 | length }}", 1, 8, "object of type 'int' has no len()"},
      {"{{ {[1]: 2} }}", 1, 4, "unhashable type: 'list'"},
      {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", 1, 34, "takes not more than 1 argument"},
      {"{{ x | tojson }}", 1, 8, "Object of type Undefined is not JSON serializable"},
      {"{{ 'a'.split('') }}", 1, 13, "empty separator"},
      {"{% for x in [1] %}{{ loop(x) }}{% endfor %}", 1, 22, "non recursive loop"},
      {"{{ 'x' if false }}{{ ('x' if false).y }}", 1, 36, "no else section"},
      {"{{ none.x.y }}", 1, 10, "'None' has no attribute 'x'"},
  };
  for (const BadCase& c : cases) {
    Template::parse(c.source, "bad.jinja");  // parses
    expect_error(c, true);
  }
}

TEST(JinjaErrors, DeepNestingIsRejectedNotCrashing) {
  const std::string parens =
      "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_THROW(Template::parse(parens, "deep"), TemplateError);
  const std::string brackets = "{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}";
  EXPECT_THROW(Template::parse(brackets, "deep"), TemplateError);
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_THROW(Template::parse(nots + "x }}", "deep"), TemplateError);
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += " + 1";
  EXPECT_THROW(Template::parse(sum + " }}", "deep"), TemplateError);
  std::string ifs;
  for (int i = 0; i < 100000; ++i) ifs += "{% if true %}";
  EXPECT_THROW(Template::parse(ifs, "deep"), TemplateError);
  std::string dots = "{{ x";
  for (int i = 0; i < 100000; ++i) dots += ".a";
  EXPECT_THROW(Template::parse(dots + " }}", "deep"), TemplateError);
  // Moderate nesting is fine.
  EXPECT_EQ(Template::parse("{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}", "ok")
                .render({}),
            "1");
}

TEST(JinjaErrors, GarbageNeverCrashes) {
  // Random-ish byte soup made from template syntax: every outcome is a
  // rendered string or a TemplateError.
  const char* pieces[] = {"{{",    "}}",     "{%",    "%}",       "{#", "#}",  "for", "if",
                          "endif", "endfor", "x",     "in",       "(",  ")",   "[",   "]",
                          "'",     "\"",     "|",     "-",        "+",  "set", "=",   ".",
                          ",",     "loop",   "macro", "endmacro", "\n", " ",   "1",   "not"};
  uint64_t state = 12345;
  for (int round = 0; round < 3000; ++round) {
    std::string src;
    const int n = 1 + static_cast<int>(state % 24);
    for (int i = 0; i < n; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      src += pieces[(state >> 33) % (sizeof(pieces) / sizeof(pieces[0]))];
    }
    try {
      Template::parse(src, "fuzz").render({});
    } catch (const TemplateError&) {
    }
  }
}

}  // namespace
}  // namespace pagellm::jinja
