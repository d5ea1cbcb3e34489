"""Tool-call ids are unique across requests and APIs (clients match tool
results to calls by id: a repeated id breaks agent loops), the Anthropic
client runs a tool loop on a real model, and a non-streamed request whose
client leaves stops costing the engine."""
import json
import re
import socket
import time

import pytest
import requests

from test_real_model import smollm2  # noqa: F401  (the fixture)

DIGIT = {"type": "function", "function": {
    "name": "pick", "description": "Picks a digit",
    "parameters": {"type": "object", "properties": {"d": {"type": "integer", "minimum": 0, "maximum": 9}},
                   "required": ["d"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "Pick digits."}]


def chat_ids(server, stream, seed):
    body = {"messages": ASK, "tools": [DIGIT], "tool_choice": "required", "n": 4, "seed": seed,
            "max_tokens": 120, "temperature": 1.0}
    url = server.url + "/v1/chat/completions"
    if not stream:
        r = requests.post(url, json=body, timeout=120)
        assert r.status_code == 200, r.text
        return [c["id"] for ch in r.json()["choices"] for c in ch["message"].get("tool_calls") or []]
    r = requests.post(url, json={**body, "stream": True}, stream=True, timeout=120)
    ids = []
    for line in r.iter_lines():
        if line.startswith(b"data: {"):
            for ch in json.loads(line[6:])["choices"]:
                ids += [tc["id"] for tc in ch["delta"].get("tool_calls", []) if "id" in tc]
    return ids


def responses_ids(server, stream, seed):
    body = {"input": "Pick digits.", "seed": seed, "max_output_tokens": 120, "tool_choice": "required",
            "tools": [{"type": "function", "name": "pick", "parameters": DIGIT["function"]["parameters"]}]}
    url = server.url + "/v1/responses"
    if not stream:
        r = requests.post(url, json=body, timeout=120)
        assert r.status_code == 200, r.text
        return [o["call_id"] for o in r.json()["output"] if o["type"] == "function_call"]
    r = requests.post(url, json={**body, "stream": True}, stream=True, timeout=120)
    ids = []
    for line in r.iter_lines():
        if line.startswith(b"data: {"):
            e = json.loads(line[6:])
            if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call":
                ids.append(e["item"]["call_id"])
    return ids


def anthropic_ids(server, stream, seed):
    import anthropic
    client = anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)
    kw = dict(model="any", max_tokens=120, messages=ASK, tool_choice={"type": "any"},
              tools=[{"name": "pick", "description": "Picks a digit",
                      "input_schema": DIGIT["function"]["parameters"]}],
              )
    if stream:
        with client.messages.stream(**kw) as s:
            msg = s.get_final_message()
    else:
        msg = client.messages.create(**kw)
    assert msg.stop_reason == "tool_use"
    return [b.id for b in msg.content if b.type == "tool_use"]


def test_a_hundred_tool_calls_have_a_hundred_ids(server):
    ids, requests_made, seed = [], 0, 0
    makers = [chat_ids, responses_ids, anthropic_ids]
    while len(ids) < 100:
        assert requests_made < 60, f"only {len(ids)} calls after {requests_made} requests"
        make = makers[requests_made % 3]
        got = make(server, stream=(requests_made // 3) % 2 == 1, seed=seed)
        assert got, make.__name__
        ids += got
        requests_made += 1
        seed += 1
    assert requests_made >= 15
    assert len(set(ids)) == len(ids), sorted(ids)
    for i in ids:
        assert re.fullmatch(r"(call|toolu)_[0-9a-f]{24}", i), i  # 96 random bits


WEATHER_TOOL = {"name": "get_weather", "description": "The weather in a city",
                "input_schema": {"type": "object",
                                 "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 20}},
                                 "required": ["city"], "additionalProperties": False}}


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_tool_loop_on_a_real_model(start_server, smollm2, stream):
    import anthropic
    jsonschema = pytest.importorskip("jsonschema")
    server = start_server("-c", "8192", "--max-seq-len", "2048", model=smollm2)
    client = anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=300)

    def create(**kw):
        if not stream:
            return client.messages.create(**kw)
        with client.messages.stream(**kw) as s:
            return s.get_final_message()

    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = create(model="smollm2", max_tokens=200, messages=messages, tools=[WEATHER_TOOL],
                   tool_choice={"type": "any"}, extra_body={"temperature": 0.5})
    assert first.stop_reason == "tool_use"
    uses = [b for b in first.content if b.type == "tool_use"]
    assert uses and all(u.name == "get_weather" for u in uses)
    for u in uses:
        jsonschema.validate(u.input, WEATHER_TOOL["input_schema"])
        assert u.id.startswith("toolu_")
    messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": u.id, "content": "Sunny, 21 C"} for u in uses]})
    final = create(model="smollm2", max_tokens=60, messages=messages, tools=[WEATHER_TOOL],
                   tool_choice={"type": "none"}, extra_body={"temperature": 0.0})
    assert final.stop_reason in ("end_turn", "max_tokens")
    text = "".join(b.text for b in final.content if b.type == "text")
    assert text.strip() and not any(b.type == "tool_use" for b in final.content)


def test_a_client_that_leaves_a_non_streamed_request_frees_its_blocks(start_server, slow_model):
    # Small steps: an abort lands between steps.
    server = start_server("-c", "4096", "--max-batched-tokens", "128", model=slow_model)
    prompt = "Once upon a time " * 300  # a prefill of seconds on this model
    body = json.dumps({"prompt": prompt, "max_tokens": 2000, "ignore_eos": True}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(head + body)
    server.wait_metric("pagellm_kv_blocks_used", lambda v: v > 0, timeout=30)
    sock.close()
    left = time.monotonic()
    server.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0, timeout=5)
    assert time.monotonic() - left < 1.0
    entry = server.wait_access(lambda e: e.get("path") == "/v1/completions")
    assert entry["error"] == "client disconnected"
    # The engine took no more of this request's work: nothing is running.
    assert server.metrics()["pagellm_requests_running"] == 0
