"""The OpenAI Responses API (POST /v1/responses) through the official openai client."""
import json

import openai
import pytest
import requests

from test_real_model import smollm2  # noqa: F401  (the fixture)

MODEL = "stories"


def test_create_plain(server, client_for):
    client = client_for(server)
    r = client.responses.create(model=MODEL, input="Tell me about a cat.", instructions="Be kind.",
                                max_output_tokens=12, temperature=0.8, top_p=0.95)
    assert r.object == "response"
    assert r.id.startswith("resp_")
    assert r.model == MODEL
    assert r.status in ("completed", "incomplete")
    assert r.instructions == "Be kind."
    assert r.max_output_tokens == 12
    assert len(r.output) == 1
    item = r.output[0]
    assert item.type == "message" and item.role == "assistant"
    assert item.content[0].type == "output_text"
    assert r.output_text == item.content[0].text
    assert r.usage.input_tokens > 0
    assert 0 < r.usage.output_tokens <= 12
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    # Stored: GET finds it.
    got = client.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text


def test_message_items_and_seed_reproduce(server, client_for):
    client = client_for(server)
    kwargs = dict(model=MODEL, max_output_tokens=16, temperature=1.0,
                  extra_body={"seed": 5},  # an extension: the client has no seed parameter
                  input=[{"role": "developer", "content": "You tell stories."},
                         {"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": "Once upon a time"}]}])
    a = client.responses.create(**kwargs)
    b = client.responses.create(**kwargs)
    assert a.output_text == b.output_text
    assert a.id != b.id


def test_stream_matches_non_stream(server, client_for):
    client = client_for(server)
    kwargs = dict(model=MODEL, input="Tell me a story.", max_output_tokens=20, extra_body={"seed": 9})
    full = client.responses.create(**kwargs)
    events = list(client.responses.create(stream=True, **kwargs))
    types = [e.type for e in events]
    final = "response.completed" if full.status == "completed" else "response.incomplete"
    assert types[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", final]
    assert set(types[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == full.output_text
    done = [e for e in events if e.type == "response.output_text.done"][0]
    assert done.text == text
    last = events[-1].response
    assert last.output_text == text
    assert last.usage.output_tokens == full.usage.output_tokens
    assert events[0].response.status == "in_progress"


def test_previous_response_id_continues(server, client_for):
    client = client_for(server)
    first = client.responses.create(model=MODEL, input="Lily had a red ball.",
                                    max_output_tokens=8, extra_body={"seed": 1})
    second = client.responses.create(model=MODEL, input="What color was it?",
                                     previous_response_id=first.id, max_output_tokens=8, extra_body={"seed": 1})
    assert second.previous_response_id == first.id
    # The earlier turn (and its reply) is in the prompt: more input tokens
    # than the first turn and the new message alone.
    alone = client.responses.create(model=MODEL, input="What color was it?", max_output_tokens=8,
                                    extra_body={"seed": 1}, store=False)
    assert second.usage.input_tokens > alone.usage.input_tokens + first.usage.output_tokens - 1
    # A chain of three, streamed.
    events = list(client.responses.create(model=MODEL, input="And then?", stream=True,
                                          previous_response_id=second.id, max_output_tokens=4))
    third = events[-1].response
    assert third.usage.input_tokens > second.usage.input_tokens
    # store=False responses cannot be continued or retrieved.
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.create(model=MODEL, input="x", previous_response_id=alone.id)
    body = err.value.response.json()
    assert body["error"]["param"] == "previous_response_id"
    assert body["error"]["code"] == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(alone.id)
    # Deleted responses are gone.
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)


def test_structured_output_json_schema(server, client_for):
    client = client_for(server)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    r = client.responses.create(model=MODEL, input="A number please.", max_output_tokens=40,
                                text={"format": {"type": "json_schema", "name": "num",
                                                 "schema": schema, "strict": True}})
    if r.status == "completed":
        value = json.loads(r.output_text)
        assert isinstance(value["n"], int)
    else:  # cut short by the token limit: still on the grammar's path
        assert r.output_text.startswith("{")


def test_forced_function_tool(start_server, client_for, smollm2):  # noqa: F811
    # An instruct model (the shipped one writes no sensible calls): SmolLM2.
    client = client_for(start_server("-c", "8192", "--max-seq-len", "2048", model=smollm2))
    tools = [{"type": "function", "name": "get_weather", "description": "Weather of a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string",
                                                                      "maxLength": 8}},
                             "required": ["city"], "additionalProperties": False}}]
    r = client.responses.create(model=MODEL, input="Weather in Paris?", tools=tools,
                                tool_choice={"type": "function", "name": "get_weather"},
                                parallel_tool_calls=False, max_output_tokens=60, temperature=0)
    assert r.parallel_tool_calls is False
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1
    assert calls[0].name == "get_weather"
    assert calls[0].call_id.startswith("call_")
    assert isinstance(json.loads(calls[0].arguments)["city"], str)
    # The tool's result continues the conversation.
    out = client.responses.create(
        model=MODEL, previous_response_id=r.id, max_output_tokens=5,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"}])
    assert out.status in ("completed", "incomplete")
    # Streamed, the call comes as function_call items.
    events = list(client.responses.create(model=MODEL, input="Weather in Rome?", tools=tools,
                                          tool_choice="required", max_output_tokens=60,
                                          temperature=0, stream=True))
    types = [e.type for e in events]
    assert "response.function_call_arguments.done" in types
    assert events[-1].response.output[0].type == "function_call"


def error_of(server, body, headers=None):
    r = requests.post(server.url + "/v1/responses", json=body, headers=headers, timeout=30)
    return r.status_code, r.json()


@pytest.mark.parametrize("body,param", [
    ({}, "input"),
    ({"input": 3}, "input"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0]"),
    ({"input": "x", "max_output_tokens": -1}, "max_output_tokens"),
    ({"input": "x", "temperature": "hot"}, "temperature"),
    ({"input": "x", "tools": [{"type": "file_search"}]}, "tools[0]"),
    ({"input": "x", "text": {"format": {"type": "json_schema"}}}, "text.format"),
])
def test_bad_input_has_openai_error_shape(server, body, param):
    status, out = error_of(server, body)
    assert status == 400
    assert set(out) == {"error"}
    assert set(out["error"]) == {"message", "type", "param", "code"}
    assert out["error"]["type"] == "invalid_request_error"
    assert out["error"]["param"] == param


def test_not_json_and_wrong_method(server):
    r = requests.post(server.url + "/v1/responses", data="{nope", timeout=30,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = requests.get(server.url + "/v1/responses", timeout=30)
    assert r.status_code == 405 and r.headers["Allow"] == "POST"
    r = requests.get(server.url + "/v1/responses/resp_missing", timeout=30)
    assert r.status_code == 404 and r.json()["error"]["message"].startswith("Response with id")


def test_api_key(start_server, client_for):
    srv = start_server("--api-key", "k3y", "--alias", MODEL)
    with pytest.raises(openai.AuthenticationError):
        client_for(srv, api_key="wrong").responses.create(model=MODEL, input="Hi",
                                                          max_output_tokens=2)
    r = client_for(srv, api_key="k3y").responses.create(model=MODEL, input="Hi",
                                                        max_output_tokens=2)
    assert r.status in ("completed", "incomplete")
    events = list(client_for(srv, api_key="k3y").responses.create(
        model=MODEL, input="Hi", max_output_tokens=2, stream=True))
    assert events[-1].type in ("response.completed", "response.incomplete")
