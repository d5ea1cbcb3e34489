// The Jinja engine against Python's Jinja2 on small snippets
// (tests/data/jinja/semantics.json, written by make_jinja_golden.py), plus
// what Jinja2 cannot tell us: limits, the {% generation %} tag, 64-bit ints.
#include "jinja/jinja_template.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "support/test_support.h"
#include "jinja/jinja_json.h"

namespace pagellm::jinja {
namespace {

using nlohmann::ordered_json;

std::tm fixed_now() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 10;
  tm.tm_min = 30;
  tm.tm_wday = 5;
  tm.tm_yday = 207;
  return tm;
}

std::string render(std::string_view source, const Dict& vars = {}, RenderOptions opts = {}) {
  return Template::parse(source, "t").render(vars, opts);
}

TEST(JinjaGolden, SnippetsRenderAsJinja2) {
  const ordered_json golden =
      ordered_json::parse(test::read_file(test::data_path("jinja/semantics.json")));
  Dict vars;
  for (const auto& [k, v] : golden["vars"].items()) vars.set(Value(k), from_json(v));
  RenderOptions opts;
  opts.now = fixed_now;
  int passed = 0;
  for (const ordered_json& c : golden["cases"]) {
    const std::string source = c["template"].get<std::string>();
    SCOPED_TRACE(source);
    if (c.contains("output")) {
      try {
        const std::string got = Template::parse(source, "t").render(vars, opts);
        EXPECT_EQ(got, c["output"].get<std::string>());
        passed += got == c["output"].get<std::string>();
      } catch (const TemplateError& e) {
        ADD_FAILURE() << "threw: " << e.what();
      }
    } else {
      try {
        const std::string got = Template::parse(source, "t").render(vars, opts);
        ADD_FAILURE() << "rendered '" << got << "'; Jinja2 raised " << c["error"];
      } catch (const TemplateError& e) {
        EXPECT_GT(e.pos().line, 0) << e.what();
        ++passed;
      }
    }
  }
  EXPECT_EQ(passed, static_cast<int>(golden["cases"].size()));
}

TEST(Jinja, GenerationTagRendersItsBody) {
  EXPECT_EQ(render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
}

TEST(Jinja, IntegersAre64Bit) {
  EXPECT_EQ(render("{{ 9223372036854775807 }}"), "9223372036854775807");
  EXPECT_THROW(render("{{ 9223372036854775807 + 1 }}"), TemplateError);
  EXPECT_THROW(render("{{ 2 ** 64 }}"), TemplateError);
  EXPECT_THROW(render("{{ 99999999999999999999 }}"), TemplateError);
}

TEST(Jinja, VariablesOverrideGlobals) {
  Dict vars;
  vars.set(Value("range"), Value("mine"));
  EXPECT_EQ(render("{{ range }}", vars), "mine");
}

TEST(Jinja, RaiseExceptionIsTemplateRaised) {
  try {
    render("line one\n  {{ raise_exception('no system role') }}");
    ADD_FAILURE() << "no error";
  } catch (const TemplateRaised& e) {
    EXPECT_EQ(e.message(), "no system role");
    EXPECT_EQ(e.pos().line, 2);
    EXPECT_EQ(std::string(e.what()), "t:2:6: no system role");
  }
}

TEST(JinjaLimits, OutputSize) {
  RenderOptions opts;
  opts.limits.max_bytes = 1000;
  EXPECT_EQ(render("{% for i in range(99) %}x{% endfor %}", {}, opts).size(), 99u);
  EXPECT_THROW(render("{% for i in range(2000) %}x{% endfor %}", {}, opts), TemplateError);
  EXPECT_THROW(render("{{ 'x' * 5000 }}", {}, opts), TemplateError);
  EXPECT_THROW(render("{{ ['x'] * 5000 }}", {}, opts), TemplateError);
  EXPECT_THROW(render("{{ 'ab' | replace('', 'x' * 900) }}", {}, opts), TemplateError);
  EXPECT_THROW(render("{{ range(1000) | join('x' * 100) }}", {}, opts), TemplateError);
  EXPECT_THROW(render("{{ 'a\nb\nc' | indent(600) }}", {}, opts), TemplateError);
  EXPECT_THROW(render("{{ '%2000s' % 'x' }}", {}, opts), TemplateError);
  EXPECT_THROW(render("{{ 'x'.center(5000) }}", {}, opts), TemplateError);
  // Exponential growth is caught before it exhausts memory.
  EXPECT_THROW(render("{% set ns = namespace(s='xx') %}{% for i in range(100) %}"
                      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
               TemplateError);
}

TEST(JinjaLimits, RecursionDepth) {
  try {
    render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
    ADD_FAILURE() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("nested too deeply"), std::string::npos) << e.what();
  }
  // Mutual recursion and recursive loops are bounded the same way.
  EXPECT_THROW(render("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}"
                      "{% endmacro %}{{ a() }}"),
               TemplateError);
  Dict vars;
  vars.set(Value("x"), from_json(ordered_json::parse(R"([[[[[[1]]]]]])")));
  RenderOptions opts;
  opts.limits.max_call_depth = 3;
  EXPECT_THROW(render("{% for i in x recursive %}{% if i is iterable %}{{ loop(i) }}"
                      "{% endif %}{% endfor %}",
                      vars, opts),
               TemplateError);
  opts.limits.max_call_depth = 10;
  EXPECT_EQ(render("{% for i in x recursive %}{% if i is iterable %}{{ loop(i) }}{% else %}"
                   "{{ loop.depth }}{% endif %}{% endfor %}",
                   vars, opts),
            "6");
}

TEST(JinjaLimits, StackUse) {
  RenderOptions opts;
  opts.limits.max_call_depth = 100000;
  opts.limits.max_stack_bytes = 64 << 10;
  try {
    render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {}, opts);
    ADD_FAILURE() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes of stack"), std::string::npos) << e.what();
  }
}

TEST(JinjaLimits, ValueNesting) {
  EXPECT_THROW(render("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}"
                      "{% set ns.x = [ns.x] %}{% endfor %}"),
               TemplateError);
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(3) %}"
                   "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}"),
            "[[[[]]]]");
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  EXPECT_THROW(from_json(ordered_json::parse(deep)), ValueError);
}

TEST(JinjaLimits, Work) {
  RenderOptions opts;
  opts.limits.max_steps = 10000;
  EXPECT_THROW(render("{% for i in range(100) %}{% for j in range(100) %}{% for k in range(100) %}"
                      "{% endfor %}{% endfor %}{% endfor %}",
                      {}, opts),
               TemplateError);
}

TEST(Jinja, NamespaceCyclesAreReleased) {
  // A namespace holding itself (or a loop object) must not leak; with ASan
  // this would report. Rendering twice exercises the release path.
  const Template t = Template::parse(
      "{% set ns = namespace() %}{% set ns.me = ns %}{% for i in [1] %}{% set ns.l = loop %}"
      "{% endfor %}ok",
      "t");
  EXPECT_EQ(t.render({}), "ok");
  EXPECT_EQ(t.render({}), "ok");
}

TEST(Jinja, RendersFromManyThreads) {
  const Template t = Template::parse(
      "{% for m in messages %}{{ m.role }}:{{ m.content | trim }};{% endfor %}", "t");
  Dict vars;
  vars.set(Value("messages"),
           from_json(ordered_json::parse(R"([{"role": "user", "content": " hi "}])")));
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) ok += t.render(vars) == "user:hi;";
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 800);
}

}  // namespace
}  // namespace pagellm::jinja
