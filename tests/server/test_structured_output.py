"""Structured output through the server: `grammar` (GBNF), `response_format`
json_object and json_schema, llama-server's `json_schema`; bad grammars and
schemas are 400s that say where and what. On the shipped model (random text)
the replies must still follow the constraint; on SmolLM2-135M-Instruct 20
sampled replies to a schema all parse and validate (`jsonschema`)."""
import json
import re

import pytest
import requests

from test_real_model import smollm2  # noqa: F401  (the fixture)

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MSGS = [{"role": "user", "content": "Tell me a story"}]

LIST_GBNF = 'root ::= "[" item ("," " "? item){0,3} "]"\nitem ::= [0-9]{1,3} | "\\"" [a-z]{1,8} "\\""'
LIST_RE = re.compile(r'\[(\d{1,3}|"[a-z]{1,8}")(, ?(\d{1,3}|"[a-z]{1,8}")){0,3}\]')

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "mood": {"enum": ["happy", "sad", "calm"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 10},
                 "minItems": 1, "maxItems": 3},
        "pet": {"type": "object",
                "properties": {"kind": {"type": "string", "enum": ["cat", "dog"]},
                               "legs": {"type": "integer", "minimum": 0, "maximum": 4}},
                "required": ["kind", "legs"], "additionalProperties": False},
        "note": {"type": ["string", "null"], "maxLength": 30},
    },
    "required": ["name", "age", "mood", "tags", "pet", "note"],
    "additionalProperties": False,
}


def post(server, path, body):
    return requests.post(server.url + path, json=body, timeout=120)


def test_gbnf_grammar_on_chat_and_completions(server):
    for path, body in [(CHAT, {"messages": MSGS}), (COMPLETIONS, {"prompt": "Once upon"})]:
        r = post(server, path, {**body, "grammar": LIST_GBNF, "max_tokens": 60, "n": 4,
                                "temperature": 1.0, "seed": 7})
        assert r.status_code == 200, r.text
        for choice in r.json()["choices"]:
            text = choice["message"]["content"] if path == CHAT else choice["text"]
            if choice["finish_reason"] == "stop":
                assert LIST_RE.fullmatch(text), text
            else:
                assert choice["finish_reason"] == "length"


def test_json_object_and_schema_on_the_shipped_model(server, client_for):
    client = client_for(server)
    r = client.chat.completions.create(model="stories", messages=MSGS, max_tokens=200,
                                       response_format={"type": "json_object"}, seed=3)
    c = r.choices[0]
    if c.finish_reason == "stop":
        assert isinstance(json.loads(c.message.content), dict)
    small = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1,
                                                      "maximum": 9}}, "required": ["n"],
             "additionalProperties": False}
    r = client.chat.completions.create(
        model="stories", messages=MSGS, max_tokens=40, seed=5, n=5, temperature=1.0,
        response_format={"type": "json_schema",
                         "json_schema": {"name": "n", "schema": small, "strict": True}})
    jsonschema = pytest.importorskip("jsonschema")
    done = 0
    for c in r.choices:
        if c.finish_reason == "stop":
            jsonschema.validate(json.loads(c.message.content), small)
            done += 1
    assert done >= 3
    # llama-server's top-level json_schema, streamed.
    chunks = requests.post(server.url + CHAT, json={"messages": MSGS, "json_schema": small,
                                                     "max_tokens": 40, "stream": True, "seed": 9},
                           stream=True, timeout=120)
    text = ""
    for line in chunks.iter_lines():
        if line.startswith(b"data: {"):
            delta = json.loads(line[6:])["choices"]
            if delta and delta[0]["delta"].get("content"):
                text += delta[0]["delta"]["content"]
    assert re.fullmatch(r'\{\s*"n"\s*:\s*[1-9]\s*\}\s*', text) or len(text) > 0


@pytest.mark.parametrize("body,param,contains", [
    ({"grammar": "root ::= \"a"}, "grammar", ["at byte 11"]),
    ({"grammar": "root ::= foo"}, "grammar", ["undefined rule 'foo'"]),
    ({"grammar": 5}, "grammar", ["must be a string"]),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "schema": {"type": "object", "patternProperties": {}}}}}, "response_format",
     ["patternProperties"]),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "#/$defs/x"}}}},
     "response_format", []),
    ({"response_format": {"type": "xml"}}, "response_format", ["xml"]),
    ({"response_format": {"type": "json_schema"}}, "response_format", ["json_schema"]),
    ({"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}, "response_format",
     ["both"]),
])
def test_bad_grammars_and_schemas_are_400(server, body, param, contains):
    r = post(server, CHAT, {"messages": MSGS, **body})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    for text in contains:
        assert text in err["message"], err
    # The server still serves.
    assert post(server, CHAT, {"messages": MSGS, "max_tokens": 2}).status_code == 200


def test_twenty_sampled_replies_validate_on_a_real_model(start_server, client_for, smollm2):
    jsonschema = pytest.importorskip("jsonschema")
    server = start_server("-c", "8192", "--max-seq-len", "1024", model=smollm2)
    client = client_for(server)
    r = client.chat.completions.create(
        model="smollm2", max_tokens=300, temperature=1.0, seed=11, n=20,
        messages=[{"role": "user", "content": "Describe a person and their pet as JSON."}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}})
    assert len(r.choices) == 20
    for c in r.choices:
        assert c.finish_reason == "stop", c.message.content
        jsonschema.validate(json.loads(c.message.content), SCHEMA)


DATE_SCHEMA = {
    "type": "object",
    "properties": {"at": {"type": "string", "format": "date-time"},
                   "day": {"type": "string", "format": "date"},
                   "clock": {"type": "string", "format": "time"}},
    "required": ["at", "day", "clock"],
    "additionalProperties": False,
}


def rfc3339_checker():
    """jsonschema's JSON Schema 2020-12 format checker, after making sure it
    really checks these formats: date-time and time need the rfc3339-validator
    package (scripts/setup.sh installs it), without which they pass anything.
    (jsonschema.FormatChecker() is not used: its "time" is draft 3's
    HH:MM:SS, which refuses the offset that RFC 3339 full-time requires.)"""
    import jsonschema  # no importorskip: without it this test must fail
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    for fmt, bad in [("date-time", "1000-10-10T00:00:00"), ("date-time", "1000-19-39T00:00:00Z"),
                     ("date-time", "2023-02-29T00:00:00Z"), ("time", "12:00:00"),
                     ("time", "24:00:00Z"), ("date", "2023-02-29"), ("date", "0000-01-01")]:
        assert not checker.conforms(bad, fmt), f"{fmt} {bad!r} passed: is rfc3339-validator installed?"
    for fmt, good in [("date-time", "2024-02-29t23:59:59.5z"), ("time", "00:00:00+05:30"),
                      ("date", "2000-02-29")]:
        assert checker.conforms(good, fmt), f"{fmt} {good!r}"
    return jsonschema, checker


def test_date_time_formats_validate_with_jsonschema(server):
    """Many sampled date-times, dates and times (the shipped model at a high
    temperature: near random walks through the grammar) all pass jsonschema's
    format checks."""
    jsonschema, checker = rfc3339_checker()
    seen, finished = set(), 0
    for seed in range(12):
        r = post(server, COMPLETIONS, {
            "prompt": "Once upon a time", "max_tokens": 300, "n": 16, "temperature": 1.6,
            "seed": seed, "response_format": {"type": "json_schema", "json_schema": {
                "name": "when", "schema": DATE_SCHEMA}}})
        assert r.status_code == 200, r.text
        for choice in r.json()["choices"]:
            if choice["finish_reason"] != "stop":
                continue  # cut by max_tokens (a long fraction): not a whole object
            finished += 1
            value = json.loads(choice["text"])
            jsonschema.validate(value, DATE_SCHEMA, format_checker=checker)
            seen.update(value.values())
    assert finished >= 150, finished
    assert len(seen) >= 3 * finished * 0.9, "the samples should differ"
