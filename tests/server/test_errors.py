"""Bad input gets the right status and an OpenAI-shaped error; nothing crashes
the server or leaks KV blocks."""
import json
import random

import pytest
import requests

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MSGS = [{"role": "user", "content": "Hi"}]


def post(server, path, body, raw=False, headers=None):
    data = body if raw else json.dumps(body)
    return requests.post(server.url + path, data=data, timeout=30,
                         headers={"Content-Type": "application/json", **(headers or {})})


def assert_error(r, status, param=None, code=None, contains=()):
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["type"], str) and err["type"]
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err
    for text in contains:
        assert text in err["message"], err
    return err


@pytest.mark.parametrize("raw", [b"{", b"", b"{\"messages\": [", b"\xff\xfe", b"nul", b"{} {}"])
def test_malformed_json(server, raw):
    assert_error(post(server, CHAT, raw, raw=True), 400, code="invalid_json")
    assert_error(post(server, COMPLETIONS, raw, raw=True), 400, code="invalid_json")


@pytest.mark.parametrize("body", [[], "text", 42, None, True, [MSGS]])
def test_non_object_body(server, body):
    assert_error(post(server, CHAT, body), 400, contains=["JSON object"])


@pytest.mark.parametrize("field,value", [
    ("messages", "hello"), ("messages", {"role": "user"}), ("max_tokens", "10"),
    ("max_tokens", 1.5), ("temperature", "hot"), ("top_p", [1]), ("n", 2.5), ("stream", "yes"),
    ("stop", 5), ("stop", [1, 2]), ("seed", "x"), ("model", 3), ("logprobs", 1),
    ("top_k", 0.5), ("presence_penalty", "a"), ("stream_options", 1),
])
def test_wrong_types_chat(server, field, value):
    body = {"messages": MSGS, field: value}
    if field == "stream_options":
        body["stream"] = True
    assert_error(post(server, CHAT, body), 400, param=field)


@pytest.mark.parametrize("prompt", [5, {"a": 1}, [1, "a"], ["a", 1], [[1], "a"], [1.5],
                                    [[1, "x"]], [True]])
def test_wrong_prompt_types(server, prompt):
    r = post(server, COMPLETIONS, {"prompt": prompt})
    err = assert_error(r, 400)
    assert err["param"].startswith("prompt")


def test_missing_fields(server):
    assert_error(post(server, CHAT, {}), 400, param="messages")
    assert_error(post(server, COMPLETIONS, {}), 400, param="prompt")
    assert_error(post(server, COMPLETIONS, {"prompt": []}), 400, param="prompt")
    assert_error(post(server, COMPLETIONS, {"prompt": [[]]}), 400, param="prompt[0]")


def test_messages(server):
    assert_error(post(server, CHAT, {"messages": []}), 400, param="messages",
                 contains=["empty"])
    assert_error(post(server, CHAT, {"messages": [{"role": "wizard", "content": "x"}]}), 400,
                 param="messages[0].role", contains=["wizard"])
    assert_error(post(server, CHAT, {"messages": [{"content": "x"}]}), 400,
                 param="messages[0].role")
    assert_error(post(server, CHAT, {"messages": [{"role": 1, "content": "x"}]}), 400,
                 param="messages[0].role")
    assert_error(post(server, CHAT, {"messages": [{"role": "user"}]}), 400,
                 param="messages[0].content")
    assert_error(post(server, CHAT, {"messages": [{"role": "user", "content": 5}]}), 400,
                 param="messages[0].content")
    assert_error(post(server, CHAT, {"messages": ["hi"]}), 400, param="messages[0]")
    image = [{"type": "image_url", "image_url": {"url": "x"}}]
    assert_error(post(server, CHAT, {"messages": [{"role": "user", "content": image}]}), 400,
                 param="messages[0].content[0]")
    # Text parts, developer role and an assistant turn without content are fine.
    parts = [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]
    ok = post(server, CHAT, {"max_tokens": 2, "messages": [
        {"role": "developer", "content": "Be brief."}, {"role": "user", "content": parts},
        {"role": "assistant", "content": None}, {"role": "user", "content": "Go on"}]})
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("field,value", [
    ("temperature", -0.1), ("temperature", 2.5), ("top_p", 0), ("top_p", 1.01), ("n", 0),
    ("n", 129), ("max_tokens", 0), ("max_tokens", -5), ("presence_penalty", 2.5),
    ("frequency_penalty", -3), ("min_p", 1.5), ("top_k", -2), ("repetition_penalty", 0),
    ("top_logprobs", 21), ("max_tokens", 2**40), ("seed", 2**70),
])
def test_out_of_range_chat(server, field, value):
    body = {"messages": MSGS, field: value}
    if field == "top_logprobs":
        body["logprobs"] = True
    assert_error(post(server, CHAT, body), 400, param=field)


@pytest.mark.parametrize("field,value", [("logprobs", 21), ("logprobs", -1), ("n", 200),
                                         ("stop", [""]), ("stop", ["x"] * 17)])
def test_out_of_range_completions(server, field, value):
    assert_error(post(server, COMPLETIONS, {"prompt": "Hi", field: value}), 400, param=field)


def test_unsupported_and_inconsistent(server):
    assert_error(post(server, CHAT, {"messages": MSGS, "top_logprobs": 2}), 400,
                 param="top_logprobs")
    assert_error(post(server, CHAT, {"messages": MSGS, "stream_options": {"include_usage": True}}),
                 400, param="stream_options")
    assert_error(post(server, COMPLETIONS, {"prompt": "Hi", "echo": True}), 400, param="echo",
                 code="unsupported_parameter")
    assert_error(post(server, CHAT, {"messages": MSGS, "logit_bias": {"1": 500}}), 400,
                 param="logit_bias")
    assert_error(post(server, CHAT, {"messages": MSGS, "tools": [{"type": "function"}]}), 400,
                 param="tools[0]")
    assert_error(post(server, COMPLETIONS, {"prompt": "Hi", "tools": [{"type": "function"}]}), 400,
                 param="tools", code="unsupported_parameter")
    assert_error(post(server, COMPLETIONS, {"prompt": "Hi", "best_of": 3}), 400, param="best_of")
    assert_error(post(server, COMPLETIONS, {"prompt": ["a"] * 20, "n": 10}), 400, param="n")


def test_context_length_exceeded(server):
    ctx = requests.get(server.url + "/v1/models", timeout=10).json()["data"][0]["max_model_len"]
    err = assert_error(post(server, COMPLETIONS, {"prompt": [1] * (ctx + 88)}), 400,
                       code="context_length_exceeded")
    assert str(ctx) in err["message"] and str(ctx + 88) in err["message"]
    err = assert_error(post(server, COMPLETIONS, {"prompt": [1] * 10, "max_tokens": ctx}), 400,
                       param="max_tokens", code="context_length_exceeded")
    assert str(ctx) in err["message"] and str(ctx + 10) in err["message"]
    long_text = "Once upon a time " * ctx
    err = assert_error(post(server, CHAT, {"messages": [{"role": "user", "content": long_text}]}),
                       400, param="messages", code="context_length_exceeded")
    assert str(ctx) in err["message"]
    # Streams are refused before they start, too.
    assert_error(post(server, COMPLETIONS, {"prompt": [1] * (ctx + 1), "stream": True}), 400,
                 code="context_length_exceeded")


def test_out_of_vocabulary_tokens(server):
    for prompt in ([1, 99999], [[1, 2], [1, -1]], [1, 512], [2**63 - 1]):
        err = assert_error(post(server, COMPLETIONS, {"prompt": prompt}), 400,
                           code="invalid_token_id")
        assert "vocabulary" in err["message"]
    assert post(server, COMPLETIONS, {"prompt": [1, 511], "max_tokens": 1}).status_code == 200


def test_unknown_paths_and_methods(server):
    r = requests.get(server.url + "/v1/nothing", timeout=10)
    assert_error(r, 404, contains=["/v1/nothing"])
    assert_error(requests.post(server.url + "/nothing", data="{}", timeout=10), 404)
    assert_error(requests.get(server.url + CHAT, timeout=10), 405)
    assert_error(requests.post(server.url + "/v1/models", timeout=10), 405)


def test_body_too_large(server):
    r = post(server, COMPLETIONS, b"{\"prompt\": \"" + b"a" * (17 << 20) + b"\"}", raw=True)
    assert r.status_code == 413
    assert "error" in r.json()


def test_deep_nesting_and_fuzz_do_not_crash(server):
    assert_error(post(server, CHAT, b"[" * 200000 + b"]" * 200000, raw=True), 400)
    assert_error(post(server, CHAT, b"{\"a\":" * 100000, raw=True), 400)
    rng = random.Random(7)
    leaves = [None, True, 0, -1, 1.5, 1e308, "", "x", "\u0000", [], {}, 2**64, -2**63]
    keys = ["messages", "prompt", "max_tokens", "temperature", "n", "stop", "stream", "logprobs",
            "top_logprobs", "seed", "top_p", "stream_options", "model", "role", "content"]

    def value(depth):
        if depth > 2 or rng.random() < 0.5:
            return rng.choice(leaves)
        if rng.random() < 0.5:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randint(0, 3))}

    for i in range(150):
        body = {rng.choice(keys): value(0) for _ in range(rng.randint(0, 5))}
        if rng.random() < 0.5:
            body["messages"] = [{"role": rng.choice(["user", "x", 1]), "content": value(1)}]
        if "max_tokens" not in body:
            body["max_tokens"] = 4
        path = CHAT if i % 2 else COMPLETIONS
        r = post(server, path, body)
        assert r.status_code in (200, 400), (body, r.status_code, r.text)
        if r.status_code == 400:
            assert_error(r, 400)
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
    server.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0)
    server.wait_metric("pagellm_requests_in_flight", lambda v: v == 0)


def test_errors_are_logged(server):
    post(server, CHAT, {"messages": []})
    # Other tests also log 400s on this path: wait for this request's line.
    entry = server.wait_access(
        lambda e: e["status"] == 400 and e["path"] == CHAT and "empty" in e.get("error", ""))
    assert entry["method"] == "POST"
