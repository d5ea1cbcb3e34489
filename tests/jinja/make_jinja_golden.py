#!/usr/bin/env python3
"""Writes tests/data/jinja/semantics.json: small Jinja snippets, each exercising
one part of the language (whitespace control, loops, scoping, macros,
operators, filters, tests, string methods, errors), rendered by Python's Jinja2
with Hugging Face's settings (see make_chat_golden.py). jinja_test.cpp renders
each with pagellm's engine and compares exactly; for snippets Jinja2 rejects
it expects an error too.

Usage: python3 tests/jinja/make_jinja_golden.py   (needs jinja2 3.1)
"""
import json
import pathlib

from make_chat_golden import make_env

OUT = pathlib.Path(__file__).resolve().parents[1] / "data" / "jinja" / "semantics.json"

VARS = {
    "xs": [1, 2, 3],
    "d": {"a": 1, "b": [1, 2]},
    "s": "h\u00e9llo w\u00f6rld",
    "n": None,
    "users": [{"name": "alice", "admin": True, "age": 30},
              {"name": "bob", "admin": False, "age": 25},
              {"name": "carol", "admin": True, "age": 41}],
    "tree": [{"name": "a", "children": [{"name": "b", "children": []},
                                         {"name": "c", "children": [{"name": "d"}]}]},
             {"name": "e"}],
}

SNIPPETS = [
    # whitespace control, trim_blocks, lstrip_blocks
    "a\n  {% if true %}\n  b\n  {% endif %}\nc",
    "{% for x in xs %}\n{{ x }}\n{% endfor %}",
    "  {{- 'x' -}}  \n y",
    "{# comment #}\nA\n  {# indented comment #}\nB",
    "{%+ if true %}x{% endif +%}\ny",
    "  {%+ if true %}x{% endif %}",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "{% raw %}{{ not parsed }} {% if %}{% endraw %}",
    "{%- raw -%}  raw  {%- endraw -%}  x",
    "line\r\nwin\r\n{% if true %}\r\nX\r\n{% endif %}\r\n",
    "x\n",
    "x\n\n",
    "{{ 1 }}\n{{ 2 }}\n",
    "\t{% if true %}\tA\n\t{% endif %}\t",
    "a {% if true %}\nb{% endif %} c",
    "{{- '-' -}}\n\n{%- if true %}\n\n  {{- 'x' }}\n{% endif -%}\n\n",
    "{% if true -%}\u00a0x{%- endif %}",
    # loops
    "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
    "{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}",
    "{% for x in [] %}a{% else %}empty{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
    "{% for k, v in d|items %}{{ k }}{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
    "{% for x in xs if x != 2 %}{{ x }}{{ loop.last }}{{ loop.length }}{% endfor %}",
    "{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}"
    "{% if x == 3 %}{% break %}{% endif %}{% endfor %}",
    "{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}",
    "{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}",
    "{% for x in [1, 1, 2, 3, 3] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}",
    "{% for item in tree recursive %}{{ loop.depth }}{{ item.name }}{% if item.children %}"
    "({{ loop(item.children) }}){% endif %}{% endfor %}",
    "{% for c in 'ab\u00e9' %}{{ c }},{% endfor %}",
    "{% for a in xs %}{% for b in xs %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}",
    "{% for (a, b) in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}",
    "{% for x in undefined_thing %}x{% else %}none{% endfor %}",
    # scoping
    "{% set x = 1 %}{% for i in xs %}{% set x = i %}{{ x }}{% endfor %}{{ x }}",
    "{% for i in xs %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}",
    "{% set ns = namespace(total=0) %}{% for i in xs %}{% set ns.total = ns.total + i %}"
    "{% endfor %}{{ ns.total }}",
    "{% set ns = namespace(items=[]) %}{% for x in xs %}{% set ns.items = ns.items + [x * 2] %}"
    "{% endfor %}{{ ns.items }}",
    "{% set ns = namespace() %}{% set ns.a = 'v' %}{{ ns.a }}{{ ns.b }}|",
    "{% if true %}{% set z = 5 %}{% endif %}{{ z }}",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]",
    # set
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}",
    "{% set t %}  inner {{ 1 + 1 }}  {% endset %}[{{ t }}]",
    "{% set t | upper | trim %}  abc  {% endset %}[{{ t }}]",
    "{% filter upper %}hello {{ 'x' }}{% endfilter %}",
    "{% filter replace('a', 'o') | title %}banana band{% endfilter %}",
    # macros
    "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}"
    "{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }} {{ greet() }}",
    "{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}",
    "{% macro show() %}[{{ later }}]{% endmacro %}{% set later = 'seen' %}{{ show() }}",
    "{% macro a() %}A{{ b() }}{% endmacro %}{% macro b() %}B{% endmacro %}{{ a() }}",
    "{% macro m(x) -%}\n  {{ x }}\n{%- endmacro %}<{{ m(1) }}>",
    # expressions
    "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} "
    "{{ 2 ** 10 }} {{ 2 ** 3 ** 2 }} {{ 7 / 2 }} {{ 1 / 3 }} {{ 4 / 2 }} {{ -2 ** 2 }}",
    "{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -1 }} {{ 10 - 0.1 }} {{ 3 * 1.1 }} {{ true + 1 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ undefined_thing ~ 1.5 }}",
    "{{ 'ab' * 3 }} {{ 3 * 'x' }} {{ [1, 2] + [3] }} {{ [0] * 3 }} {{ 'x' * 0 }}|",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' in 'cat' }} {{ 2 not in xs }} {{ 'a' in d }} "
    "{{ 1 == 1.0 }} {{ true == 1 }} {{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ 'b' >= 'a' }}",
    "{{ not true or false and true }} {{ none or 'x' }} {{ 0 and 1 }} {{ [] or [] }} {{ 1 and 'y' }}",
    "{{ 'yes' if xs else 'no' }} [{{ 'x' if false }}] {{ 'a' if false else 'b' if true else 'c' }}",
    "{{ xs[0] }}{{ xs[-1] }}{{ xs[1:] }}{{ xs[::-1] }}{{ xs[:-1] }}{{ xs[::2] }}{{ s[1:4] }}"
    "{{ s[-3:] }}{{ s[::-1] }}[{{ xs[5] }}]{{ s[1] }}",
    "{{ d.a }}{{ d['b'][1] }}[{{ d.missing }}]{{ d.get('a') }}{{ d.get('z', 'dflt') }}{{ d.get('z') }}"
    "{{ d.b.1 }}{{ xs.0 }}",
    "{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}, (1,), ('a', 'b'), \"it's\", 'q\"'] }}",
    "{{ {'a': 1, 'b': [1, 2], 3: 'three', none: 1, (1, 2): 'tuple'} }}",
    "{{ 1e16 }} {{ 1e15 }} {{ 0.00001 }} {{ 0.0001 }} {{ 0.1 + 0.2 }} {{ 1.0 }} {{ -0.0 }} "
    "{{ 3.14159 }} {{ 2.5e-7 }} {{ 1.5e300 * 1.5e300 }} {{ 123456789012345678 }}",
    "{{ 1_000 }} {{ 0x1F }} {{ 0b101 }} {{ 0o17 }} {{ 1_0.5 }} {{ 1e3 }}",
    "{{ \"it's\" }} {{ 'say \"hi\"' }} {{ 'tab\\there' }} {{ '\\u00e9\\x41\\101' }} {{ 'a' 'b' }} "
    "{{ 'back\\\\slash' }} {{ 'keep \\d' }} {{ 'nl\\nx' }}",
    "{{ -(xs|length) }} {{ not xs|length }} {{ -3|abs }} {{ (-3)|abs }}",
    "{{ (xs) }} {{ (1, 2) }} {{ () }} {{ xs, 1 }}",
    "{{ none }} {{ true }} {{ True }} {{ none is none }} {{ None }}",
    "{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}{{ d.keys()|list }}{{ d.values()|list }}",
    # filters
    "{{ '  hi  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'Hello'|upper }}{{ 'Hello'|lower }}|"
    "{{ 'hello World'|capitalize }}|{{ 'hello wORLD-foo (bar) x.y'|title }}",
    "{{ xs|length }} {{ 'h\u00e9llo'|length }} {{ d|length }} {{ undefined_thing|length }} "
    "{{ xs|count }}",
    "{{ xs|join(', ') }} {{ xs|join }} {{ xs|first }} {{ xs|last }} {{ 'abc'|list }} "
    "{{ xs|reverse|list }} {{ 'abc'|reverse }} {{ 'abc'|first }} {{ users|join('/', attribute='name') }}",
    "{{ undefined_thing|default('dflt') }} {{ ''|default('e', true) }} {{ none|default('n') }} "
    "{{ 0|d('zero', true) }} {{ none|default('n', boolean=true) }}",
    "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} "
    "{{ [3, 1, 2]|sort(reverse=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }}",
    "{{ users|map(attribute='name')|join(',') }} {{ users|selectattr('admin')|map(attribute='name')|list }} "
    "{{ users|rejectattr('admin')|list|length }} {{ xs|select('odd')|list }} "
    "{{ xs|reject('equalto', 2)|list }} {{ users|selectattr('name', 'equalto', 'bob')|list }}",
    "{{ ['a', 'b']|map('upper')|list }} {{ [1.5, 2.5]|map('int')|list }} "
    "{{ users|map(attribute='missing', default='?')|list }} {{ xs|select|list }}",
    "{{ 'a b c'|replace(' ', '-') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'ab'|replace('', '.') }}",
    "{{ 'line1\\nline2\\n\\nline4'|indent(2) }}|{{ 'a\\nb'|indent(4, true) }}|"
    "{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'x\\ny'|indent('> ') }}",
    "{{ {'b': 1, 'a': [1, 2.5, none, true, '\u00e9\"\\\\']}|tojson }} {{ {'a': {'b': [], 'c': {}}}|tojson(indent=2) }} "
    "{{ 'x\u2028y\\u0001'|tojson }} {{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ '\u00e9'|tojson(ensure_ascii=true) }}",
    "{{ [1, 2, 1, 'A', 'a', 'b']|unique|list }} {{ [1, 5, 3]|max }} {{ [1, 5, 3]|min }} "
    "{{ ['a', 'B']|max }} {{ [1, 2, 3]|sum }} {{ users|sum(attribute='age') }} {{ users|max(attribute='age') }}",
    "{{ 3.7|int }} {{ '42'|int }} {{ '4.5'|float }} {{ 'x'|int(7) }} {{ 2.567|round(2) }} "
    "{{ 2.5|round }} {{ 3.5|round }} {{ 3|float }} {{ '0x1A'|int(0, 16) }} {{ 2.1|round(0, 'ceil') }}",
    "{{ '%s is %d years, %.2f%%'|format('Bob', 42, 99.5) }} "
    "{{ '%-5s|%5s|%05d|%x|%r|%+d|%e' % ('a', 'b', 42, 255, 'q', 3, 12345.678) }} {{ '%(a)s-%(b)s' % {'a': 1, 'b': 2} }}",
    "{{ '{} and {}'.format(1, 'two') }} {{ '{0}{1}{0}'.format('a', 'b') }} "
    "{{ '{name:>6}|{v:.3f}|{n:,}|{s:^7}|{x:#x}|{p:.1%}'.format(name='x', v=3.14159, n=1234567, s='mid', x=255, p=0.256) }}",
    "{{ d|dictsort }} {{ {'b': 2, 'a': 1, 'C': 0}|dictsort(by='value', reverse=true) }} "
    "{{ {'b': 2, 'a': 1, 'C': 0}|dictsort }}",
    "{{ xs|batch(2)|list }} {{ xs|batch(2, 0)|list }} [{{ 'hello'|center(9) }}] "
    "{{ 'one two  three'|wordcount }} {{ 'a long sentence here'|truncate(10) }} "
    "{{ 'a long sentence here'|truncate(9, true) }}",
    "{{ '<b>\"&\\''|e }} {{ ('<i>'|safe) + '<b>' }} {{ '<b>' ~ ('<i>'|safe) }} {{ '<b>' + ('&'|safe) }} "
    "{{ ('x'|safe + '\"')|length }}",
    "{{ d|attr('a') }}|{{ 'abc'|attr('upper') is callable }}",
    "{{ xs|map('string')|join('-') }} {{ 42|string + 'x' }} {{ [1, 'a']|string }} {{ none|string }}",
    # tests
    "{{ xs is iterable }}{{ 5 is iterable }}{{ 'a' is string }}{{ 1 is number }}{{ true is number }}"
    "{{ true is integer }}{{ 1.0 is float }}{{ d is mapping }}{{ xs is mapping }}{{ none is none }}"
    "{{ undefined_thing is defined }}{{ undefined_thing is undefined }}{{ xs is sequence }}"
    "{{ 'a' is iterable }}{{ undefined_thing is iterable }}",
    "{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 2 is in xs }}{{ 'a' is lower }}"
    "{{ 'A' is upper }}{{ 1 is eq 1 }}{{ 2 is gt 1 }}{{ 1 is ge 2 }}{{ true is true }}"
    "{{ 0 is false }}{{ true is boolean }}{{ 1 is sameas 1 }}{{ none is sameas none }}"
    "{{ 'upper' is filter }}{{ 'odd' is test }}{{ 'x' is escaped }}{{ ('x'|safe) is escaped }}",
    "{{ undefined_thing is not defined }} {{ not undefined_thing is defined }} "
    "{{ d.missing is defined }} {{ xs is not none }} {{ greet is callable }} {{ range is callable }}",
    # string methods
    "{{ '  a  '.strip() }}|{{ 'xax'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|"
    "{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|"
    "{{ 'a b c'.rsplit(' ', 1) }}|{{ 'a b c'.rsplit(None, 1) }}",
    "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x', 'lo')) }}{{ 'hello world'.title() }}"
    "{{ \"they're bill's\".title() }}{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}{{ 'aXa'.replace('a', 'b') }}"
    "{{ 'hello'.find('l') }}{{ 'hello'.rfind('l') }}{{ 'hello'.count('l') }}{{ '-'.join(['a', 'b']) }}"
    "{{ 'h\u00e9llo'.find('l') }}{{ 'hello'.index('e') }}",
    "{{ 'a\\nb\\r\\nc'.splitlines() }}{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}"
    "{{ 'abc'.capitalize() }}{{ 'x'.center(5, '*') }}{{ '42'.zfill(5) }}{{ '-42'.zfill(5) }}"
    "{{ 'a=b=c'.partition('=') }}{{ 'a=b=c'.rpartition('=') }}{{ 'abc'.removeprefix('a') }}"
    "{{ 'abc'.removesuffix('c') }}{{ 'ab'.ljust(4, '.') }}{{ 'ab'.rjust(4) }}{{ 'aBc'.swapcase() }}",
    "{{ 'h\u00e9'.upper() }}{{ '\u00c9COLE'.lower() }}{{ 'stra\u00dfe'.upper() }}"
    "{{ '\u03b1\u03b2\u03b3'.upper() }}{{ '\u041f\u0420\u0418'.lower() }}{{ '\u00e9t\u00e9'|capitalize }}",
    "{{ '\u00c0\u00c9\u00ce \u0391\u0392 \u0410\u0411 \u011e\u0130\u015e \u01c4 \u1e9e \u2160 \uff21'|lower }}",
    "{{ 'abc'.islower() }}{{ 'ABC'.isupper() }}{{ '123'.islower() }}{{ 'a1'.isalnum() }}",
    # globals and misc
    "{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=2) }} "
    "{{ namespace(a=1).a }} {{ dict({'x': 1}, y=2) }}",
    "{{ strftime_now('%Y-%m-%d %H:%M %a %b %d %B %A %j') }}",
    "{% if xs %}T{% elif d %}E{% else %}F{% endif %}{% if not xs %}T{% elif d %}E{% else %}F{% endif %}"
    "{% if not xs %}T{% elif not d %}E{% else %}F{% endif %}",
    "[{{ xs.append }}|{{ d.pop }}|{{ loop }}|{{ undefined_thing }}]",
    "{{ greet }}",
    "{% print 'printed' %} {% print 1, 2 %}",
    "{% set ns = namespace(a=1) %}{% set ns.l = [ns, 2] %}{% set ns.me = ns %}{{ ns }}",
    "[{{ '  \u3000x\u00a0 '|trim }}|{{ '\u2003y\u2029'.strip() }}|{{ '\u00e9 '.rstrip() }}]",
    # errors (Jinja2 raises; so must pagellm)
    "{{ undefined_thing.attr }}",
    "{{ undefined_thing['k'] }}",
    "{{ 1 + 'a' }}",
    "{{ 'a' + 1 }}",
    "{{ none + 1 }}",
    "{{ 1 / 0 }}",
    "{{ 1 // 0 }}",
    "{{ xs.append(4) }}",
    "{{ raise_exception('boom') }}",
    "{{ undefined_fn() }}",
    "{{ 'a' < 1 }}",
    "{% for a, b in xs %}{% endfor %}",
    "{% set a, b = [1, 2, 3] %}",
    "{{ range(1000000)|list }}",
    "{{ xs|items|list }}",
    "{{ -xs|length }}",
    "{% set d.x = 1 %}",
    "{{ 5|length }}",
    "{{ 'a' in 5 }}",
    "{{ 1 in 'abc' }}",
    "{{ -'a' }}",
    "{{ {[1]: 2} }}",
    "{{ xs|tojson|fromjson }}",
    "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{% endmacro %}{{ m(b=2) }}",
    "{{ undefined_thing|tojson }}",
    "{{ 'a'|int('x', 'y', 'z') }}",
    "{% for x in 5 %}{% endfor %}",
    "{{ xs[1:2:0] }}",
    "{{ 'x'|indent(width=2, bogus=1) }}",
    "{{ 'a'.split('') }}",
]


def main():
    env = make_env()
    cases = []
    for src in SNIPPETS:
        case = {"template": src}
        try:
            case["output"] = env.from_string(src).render(**VARS)
        except Exception as e:  # noqa: BLE001 - any failure is a golden error
            case["error"] = f"{type(e).__name__}: {e}"
        cases.append(case)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"vars": VARS, "cases": cases}, ensure_ascii=False, indent=1) + "\n",
                   encoding="utf-8")
    print(f"wrote {OUT}: {len(cases)} cases, {sum('error' in c for c in cases)} errors")


if __name__ == "__main__":
    main()
