"""Tool calling through the server: tool_choice required and named force a
call whose arguments follow the tool's parameters (streamed and not), a
conversation with a tool result continues, and bad tools are 400s. On
SmolLM2-135M-Instruct (its template does not render tools: the generic
<tool_call> form); the errors on the shipped model."""
import json

import pytest
import requests

from test_real_model import smollm2  # noqa: F401  (the fixture)

CHAT = "/v1/chat/completions"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city for some days",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 20},
                                  "days": {"type": "integer", "minimum": 1, "maximum": 7},
                                  "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "days", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 30}},
                   "required": ["zone"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather in Paris for the next 3 days?"}]


def check_call(call, tool):
    jsonschema = pytest.importorskip("jsonschema")
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == tool["function"]["name"]
    jsonschema.validate(json.loads(call["function"]["arguments"]), tool["function"]["parameters"])


def streamed(server, body):
    r = requests.post(server.url + CHAT, json={**body, "stream": True}, stream=True, timeout=300)
    assert r.status_code == 200, r.text
    calls, finish, content = {}, None, ""
    for line in r.iter_lines():
        if not line.startswith(b"data: {"):
            continue
        choice = json.loads(line[6:])["choices"][0]
        delta = choice["delta"]
        content += delta.get("content") or ""
        for tc in delta.get("tool_calls", []):
            c = calls.setdefault(tc["index"], {"id": None, "type": None,
                                               "function": {"name": None, "arguments": ""}})
            if "id" in tc:
                assert c["id"] is None, "the name and id come first, once"
                c["id"], c["type"] = tc["id"], tc["type"]
                c["function"]["name"] = tc["function"]["name"]
            c["function"]["arguments"] += tc["function"].get("arguments", "")
        finish = choice["finish_reason"] or finish
    return [calls[k] for k in sorted(calls)], finish, content


def test_required_and_named_calls_on_a_real_model(start_server, smollm2):
    server = start_server("-c", "8192", "--max-seq-len", "2048", model=smollm2)
    base = {"messages": ASK, "tools": [WEATHER, TIME], "max_tokens": 200, "temperature": 0.7}
    for seed in (1, 2):
        r = requests.post(server.url + CHAT, timeout=300,
                          json={**base, "seed": seed, "tool_choice": "required",
                                "parallel_tool_calls": False})
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        assert choice["finish_reason"] == "tool_calls", choice
        assert choice["message"]["content"] is None
        (call,) = choice["message"]["tool_calls"]
        check_call(call, WEATHER if call["function"]["name"] == "get_weather" else TIME)
    # A named function is exactly one call of it, parallel_tool_calls left at
    # its default (true): SmolLM2 used to write the same call twice.
    for seed in (3, 5, 6):
        named = {**base, "seed": seed, "tool_choice": {"type": "function", "function": {"name": "get_time"}}}
        r = requests.post(server.url + CHAT, json=named, timeout=300)
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        assert choice["finish_reason"] == "tool_calls", choice
        (call,) = choice["message"]["tool_calls"]
        check_call(call, TIME)
    calls, finish, content = streamed(server, {**base, "seed": 4, "tool_choice": {
        "type": "function", "function": {"name": "get_weather"}}})
    assert finish == "tool_calls" and content == ""
    assert len(calls) == 1
    check_call(calls[0], WEATHER)
    # The conversation goes on with the call and its result.
    follow = {"messages": ASK + [
        {"role": "assistant", "content": None, "tool_calls": [calls[0]]},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "{\"temp\": 18, \"sky\": \"clear\"}"}],
        "tools": [WEATHER], "tool_choice": "none", "max_tokens": 30, "temperature": 0}
    r = requests.post(server.url + CHAT, json=follow, timeout=300)
    assert r.status_code == 200, r.text
    msg = r.json()["choices"][0]["message"]
    assert isinstance(msg["content"], str) and "tool_calls" not in msg


@pytest.mark.parametrize("body,param,contains", [
    ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name", []),
    ({"tools": [WEATHER, WEATHER]}, "tools[1]", ["two tools"]),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice", ["nope"]),
    ({"tool_choice": "required"}, "tool_choice", ["needs 'tools'"]),
    ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice", ["sometimes"]),
    ({"tools": [WEATHER], "tool_choice": "required", "response_format": {"type": "json_object"}},
     "tool_choice", ["cannot also"]),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"not": {}}}}}}], "tool_choice": "required"},
     "tools", ["'not'"]),
])
def test_bad_tools_are_400(server, body, param, contains):
    r = requests.post(server.url + CHAT, json={"messages": ASK, "max_tokens": 4, **body}, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    for text in contains:
        assert text in err["message"], err


def test_tool_messages_need_an_assistant_and_json_arguments(server):
    bad = ASK + [{"role": "user", "content": "x", "tool_calls": []}]
    r = requests.post(server.url + CHAT, json={"messages": bad, "max_tokens": 2}, timeout=30)
    assert r.status_code == 400 and "assistant" in r.json()["error"]["message"]
    bad = ASK + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{oops"}}]}]
    r = requests.post(server.url + CHAT, json={"messages": bad, "max_tokens": 2}, timeout=30)
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]


@pytest.mark.parametrize("template,marker", [
    ("Qwen-Qwen2.5-7B-Instruct.jinja", "<tool_call>"),
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", "\"parameters\""),
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "[TOOL_CALLS]"),
])
def test_templates_with_tools_render_them_and_calls_follow_their_format(
        start_server, slow_model, template, marker):
    """The real templates render the tools (the prompt grows by them) and a
    forced call comes back in the template's own format, parsed."""
    from conftest import DATA
    server = start_server("--chat-template", str(DATA / "chat-templates" / template),
                          "-c", "4096", "--max-seq-len", "4096", model=slow_model)
    plain = requests.post(server.url + CHAT, json={"messages": ASK, "max_tokens": 1}, timeout=300)
    assert plain.status_code == 200, plain.text
    body = {"messages": ASK, "tools": [TIME], "tool_choice": "required", "max_tokens": 120,
            "temperature": 0, "parallel_tool_calls": False}
    r = requests.post(server.url + CHAT, json=body, timeout=300)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["usage"]["prompt_tokens"] > plain.json()["usage"]["prompt_tokens"] + 20
    choice = out["choices"][0]
    if choice["finish_reason"] == "tool_calls":
        (call,) = choice["message"]["tool_calls"]
        check_call(call, TIME)
    else:  # a random model may spend the tokens on whitespace inside the call
        assert choice["finish_reason"] == "length"
