"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens)
through the official anthropic client."""
import pytest
import requests

anthropic = pytest.importorskip("anthropic", reason="the anthropic client is not installed "
                                "(scripts/setup.sh installs it)")

MODEL = "stories"


def sampling(**params):
    """Sampling parameters as extra_body: recent clients dropped temperature,
    top_p and top_k from create()'s signature; the API still takes them."""
    return {"extra_body": params}


def client_of(server, api_key="unused"):
    return anthropic.Anthropic(base_url=server.url, api_key=api_key, max_retries=0, timeout=120)


def test_create(server):
    client = client_of(server)
    m = client.messages.create(model=MODEL, max_tokens=12, system="You tell stories.",
                               messages=[{"role": "user", "content": "Tell me about a cat."}],
                               **sampling(temperature=0.7, top_p=0.9, top_k=40))
    assert m.type == "message" and m.role == "assistant"
    assert m.id.startswith("msg_")
    assert m.model == MODEL
    assert len(m.content) == 1 and m.content[0].type == "text"
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert m.stop_sequence is None
    assert m.usage.input_tokens > 0
    assert 0 < m.usage.output_tokens <= 12
    if m.stop_reason == "max_tokens":
        assert m.usage.output_tokens == 12


def test_stop_reasons(server):
    client = client_of(server)
    m = client.messages.create(model=MODEL, max_tokens=1,
                               messages=[{"role": "user", "content": "Once upon a time"}])
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 1
    # Find a word the model writes, then stop on it.
    free = client.messages.create(model=MODEL, max_tokens=30, **sampling(temperature=0),
                                  messages=[{"role": "user", "content": "Once upon a time"}])
    words = [w for w in free.content[0].text.split() if len(w) > 2]
    if not words:
        pytest.skip("the model wrote no word to stop on")
    stop = words[1] if len(words) > 1 else words[0]
    m = client.messages.create(model=MODEL, max_tokens=30, **sampling(temperature=0),
                               stop_sequences=[stop],
                               messages=[{"role": "user", "content": "Once upon a time"}])
    assert m.stop_reason == "stop_sequence"
    assert m.stop_sequence == stop
    assert stop not in m.content[0].text
    assert free.content[0].text.startswith(m.content[0].text)


def test_stream_matches_non_stream(server):
    client = client_of(server)
    kwargs = dict(model=MODEL, max_tokens=20, **sampling(temperature=0),
                  system=[{"type": "text", "text": "You tell stories."}],
                  messages=[{"role": "user", "content": [{"type": "text", "text": "Hello"}]},
                            {"role": "assistant", "content": "Hi! What story?"},
                            {"role": "user", "content": "One about a dog."}])
    full = client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as stream:
        events = list(stream)
        final = stream.get_final_message()
    types = [e.type for e in events]
    assert types[0] == "message_start"
    assert "content_block_start" in types and "content_block_stop" in types
    assert types[-2:] == ["message_delta", "message_stop"]
    assert final.content[0].text == full.content[0].text
    assert final.stop_reason == full.stop_reason
    assert final.usage.output_tokens == full.usage.output_tokens
    assert final.usage.input_tokens == full.usage.input_tokens


def test_raw_sse_events(server):
    body = {"model": MODEL, "max_tokens": 5, "stream": True,
            "messages": [{"role": "user", "content": "Hi"}]}
    r = requests.post(server.url + "/v1/messages", json=body, stream=True, timeout=60,
                      headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/event-stream")
    names = [line[len("event: "):] for line in r.iter_lines(decode_unicode=True)
             if line.startswith("event: ")]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert set(names[3:-3]) <= {"content_block_delta"}
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]


def test_count_tokens(server):
    client = client_of(server)
    msgs = [{"role": "user", "content": "Tell me about a cat."}]
    n = client.messages.count_tokens(model=MODEL, messages=msgs).input_tokens
    with_system = client.messages.count_tokens(model=MODEL, messages=msgs,
                                               system="You tell stories.").input_tokens
    assert 0 < n < with_system
    m = client.messages.create(model=MODEL, max_tokens=1, messages=msgs)
    assert m.usage.input_tokens == n


@pytest.mark.parametrize("body,status,kind", [
    ({"messages": [{"role": "user", "content": "x"}]}, 400, "invalid_request_error"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]},
     400, "invalid_request_error"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]}, 400,
     "invalid_request_error"),
    ({"max_tokens": 5, "thinking": {"type": "sometimes"},
      "messages": [{"role": "user", "content": "x"}]}, 400, "invalid_request_error"),
    ({"max_tokens": 5, "temperature": 2, "messages": [{"role": "user", "content": "x"}]}, 400,
     "invalid_request_error"),
])
def test_bad_input_has_anthropic_error_shape(server, body, status, kind):
    r = requests.post(server.url + "/v1/messages", json=body, timeout=30)
    assert r.status_code == status
    out = r.json()
    assert out["type"] == "error"
    assert set(out["error"]) == {"type", "message"}
    assert out["error"]["type"] == kind
    assert out["error"]["message"]


def test_client_raises_typed_errors(server):
    client = client_of(server)
    with pytest.raises(anthropic.BadRequestError) as err:
        client.messages.create(model=MODEL, max_tokens=5, messages=[
            {"role": "user", "content": [{"type": "image", "source": {
                "type": "base64", "media_type": "image/png", "data": "AA=="}}]}])
    assert "image" in err.value.body["error"]["message"]
    r = requests.post(server.url + "/v1/messages/nope", json={}, timeout=30)
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "not_found_error"
    r = requests.get(server.url + "/v1/messages", timeout=30)
    assert r.status_code == 405 and r.json()["type"] == "error"


def test_api_key_x_api_key_and_bearer(start_server):
    srv = start_server("--api-key", "s3cret", "--alias", MODEL)
    msgs = [{"role": "user", "content": "Hi"}]
    with pytest.raises(anthropic.AuthenticationError) as err:
        client_of(srv, api_key="wrong").messages.create(model=MODEL, max_tokens=2, messages=msgs)
    assert err.value.body["error"]["type"] == "authentication_error"
    r = requests.post(srv.url + "/v1/messages", json={"max_tokens": 2, "messages": msgs}, timeout=30)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    client = client_of(srv, api_key="s3cret")  # sends x-api-key
    assert client.messages.create(model=MODEL, max_tokens=2, messages=msgs).usage.output_tokens > 0
    with client.messages.stream(model=MODEL, max_tokens=2, messages=msgs) as s:
        assert s.get_final_message().stop_reason in ("end_turn", "max_tokens")
    assert client.messages.count_tokens(model=MODEL, messages=msgs).input_tokens > 0
    r = requests.post(srv.url + "/v1/messages", json={"max_tokens": 2, "messages": msgs},
                      headers={"Authorization": "Bearer s3cret"}, timeout=30)
    assert r.status_code == 200
    # x-api-key works on the OpenAI routes too.
    r = requests.get(srv.url + "/v1/models", headers={"x-api-key": "s3cret"}, timeout=30)
    assert r.status_code == 200


def test_loading_is_overloaded_error_and_responses_503(start_server):
    srv = start_server("--debug-load-delay-ms", "3000", wait_ready=False)
    msgs = [{"role": "user", "content": "Hi"}]
    r = requests.post(srv.url + "/v1/messages", json={"max_tokens": 2, "messages": msgs}, timeout=10)
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    assert r.json() == {"type": "error", "error": {"type": "overloaded_error",
                                                   "message": "the model is loading"}}
    r = requests.post(srv.url + "/v1/messages/count_tokens", json={"messages": msgs}, timeout=10)
    assert r.status_code == 503 and r.json()["error"]["type"] == "overloaded_error"
    r = requests.post(srv.url + "/v1/responses", json={"input": "Hi"}, timeout=10)
    assert r.status_code == 503 and r.json()["error"]["code"] == "loading"
    srv.wait_ready()
    m = client_of(srv).messages.create(model=MODEL, max_tokens=2, messages=msgs)
    assert m.usage.output_tokens > 0

