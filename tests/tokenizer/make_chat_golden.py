#!/usr/bin/env python3
"""Writes tests/data/chat-templates/golden.json: every chat template in
tests/data/chat-templates/ (the real ones and builtin/*.jinja, pagellm's
built-ins) rendered by Python's Jinja2 over a set of conversations, the way
Hugging Face's apply_chat_template renders them:

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                extensions=[loopcontrols])
  filters.tojson   = json.dumps(x, ensure_ascii=False, indent=..., ...)
  raise_exception  = raise TemplateError(message)
  strftime_now     = a fixed clock (2024-07-26 10:30:00), for repeatable output

Each case records the output, or the error Python raised ("raised": true when
the template itself called raise_exception). tokenizer/chat_template_test.cpp
renders the same cases and compares exactly.

Usage: python3 tests/tokenizer/make_chat_golden.py   (needs jinja2 3.1)
"""
import datetime
import json
import pathlib

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[1] / "data" / "chat-templates"
NOW = datetime.datetime(2024, 7, 26, 10, 30, 0)
BOS, EOS = "<s>", "</s>"

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string",
                             "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                         "description": "The temperature unit"},
            },
            "required": ["location"],
        },
    },
}]


def tool_conversation(arguments):
    return [
        {"role": "user", "content": "What's the weather like in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call12345", "type": "function",
            "function": {"name": "get_current_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_current_weather",
         "content": "{\"temperature\": 22, \"unit\": \"celsius\"}"},
        {"role": "assistant", "content": "It is 22 \u00b0C in Paris right now."},
    ]


SPECIAL_USER = ("  Quotes ' and \", braces {{ x }} {% if %} {# c #}, HTML <b>&amp;</b>,\n"
                "tabs\there, a backslash \\n, unicode: caf\u00e9 \u00fc\u00df \u4f60\u597d "
                "\U0001f999 \u2014 \u00a0nbsp\n\n  trailing spaces and newlines  \n\n")

CONVERSATIONS = {
    "single": {"messages": [{"role": "user", "content": "Hello!"}]},
    "system_multi": {"messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "2 + 2 = 4."},
        {"role": "user", "content": "And 3 + 3?"},
    ]},
    "multi": {"messages": [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ]},
    "assistant_last": {"messages": [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
    ]},
    "special": {"messages": [
        {"role": "system", "content": "\n  Syst\u00e8me: r\u00e9ponds en fran\u00e7ais.\n"},
        {"role": "user", "content": SPECIAL_USER},
        {"role": "assistant",
         "content": "<think>\nLet me think.\n</think>\n\nThe answer is 42. \u2705"},
        {"role": "user", "content": "Line one\r\nLine two\rLine three\n\u2028end"},
    ]},
    "empty": {"messages": []},
    "tools_user": {"messages": [{"role": "user", "content": "What's the weather like in Paris?"}],
                   "extra": {"tools": TOOLS}},
    "tool_calls": {"messages": tool_conversation({"location": "Paris, France", "unit": "celsius"}),
                   "extra": {"tools": TOOLS}},
    "tool_calls_str": {
        "messages": tool_conversation("{\"location\": \"Paris, France\", \"unit\": \"celsius\"}"),
        "extra": {"tools": TOOLS}},
    "extra_vars": {"messages": [{"role": "user", "content": "Hello!"}],
                   "extra": {"functions": json.dumps(TOOLS), "datetime": "2024-07-26",
                             "date_string": "01 Jan 2025",
                             "documents": [{"title": "Tall penguins",
                                            "text": "Emperor penguins are the tallest."}]}},
}


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = make_env()
    paths = sorted(ROOT.glob("*.jinja")) + sorted((ROOT / "builtin").glob("*.jinja"))
    cases = []
    for path in paths:
        rel = path.relative_to(ROOT).as_posix()
        template = env.from_string(path.read_text(encoding="utf-8"))
        for conv_name, conv in CONVERSATIONS.items():
            for add_generation_prompt in (False, True):
                case = {"template": rel, "conversation": conv_name,
                        "add_generation_prompt": add_generation_prompt}
                variables = {"messages": conv["messages"],
                             "add_generation_prompt": add_generation_prompt,
                             "bos_token": BOS, "eos_token": EOS}
                variables.update(conv.get("extra", {}))
                try:
                    case["output"] = template.render(**variables)
                except Exception as e:  # noqa: BLE001 - any failure is a golden error
                    case["error"] = f"{type(e).__name__}: {e}"
                    case["raised"] = type(e) is jinja2.exceptions.TemplateError
                cases.append(case)
    golden = {
        "generator": "tests/tokenizer/make_chat_golden.py, jinja2 " + jinja2.__version__,
        "bos_token": BOS,
        "eos_token": EOS,
        "now": NOW.isoformat(),
        "conversations": CONVERSATIONS,
        "cases": cases,
    }
    out = ROOT / "golden.json"
    out.write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    n_err = sum("error" in c for c in cases)
    print(f"wrote {out}: {len(cases)} cases, {n_err} errors")


if __name__ == "__main__":
    main()
