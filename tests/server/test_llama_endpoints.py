"""llama-server's own endpoints (/tokenize, /detokenize, /apply-template,
/props, /slots, /infill), any model name answered by the loaded model, the
route table's 405 / pre-flight / key answers for them, quiet /health polls,
/favicon.ico, and /metrics counting a prefilling sequence as running."""
import json
import random
import subprocess
import threading
import time

import gguf
import jinja2
import pytest
import requests

from conftest import DATA, STORIES, Server

VECTORS = DATA / "tokenizer-vectors"
STARCODER = VECTORS / "ggml-vocab-starcoder.gguf"
SEPARATOR = "\n__ggml_vocab_test__\n"
TEMPLATE = ("{% for m in messages %}<<{{ m['role'] }}>> {{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<<assistant>> {% endif %}")


def vector_cases(name):
    """(text, expected ids) of a vocabulary's tokenizer vectors (tests/data/tokenizer-vectors/README.md)."""
    texts = (VECTORS / f"ggml-vocab-{name}.gguf.inp").read_bytes().decode("utf-8").split(SEPARATOR)[:-1]
    lines = (VECTORS / f"ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").split("\n")
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines)]


def gguf_tokens(path):
    r = gguf.GGUFReader(str(path))
    f = r.fields["tokenizer.ggml.tokens"]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def post(srv, path, body, **kw):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return requests.post(srv.url + path, data=data, timeout=60,
                         headers={"Content-Type": "application/json", **kw.pop("headers", {})}, **kw)


def assert_error(r, status, param=None, code=None, contains=()):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err
    for text in contains:
        assert text in err["message"], err
    return err


def tokenize(srv, text, add_special=False, parse_special=False):
    r = post(srv, "/tokenize", {"content": text, "add_special": add_special,
                                "parse_special": parse_special})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


@pytest.fixture(scope="module")
def template_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tmpl") / "roles.jinja"
    path.write_text(TEMPLATE)
    return path


@pytest.fixture(scope="module")
def stories(pagellm_bin, template_file):
    s = Server(pagellm_bin, ["-m", str(STORIES), "--alias", "stories", "--slots",
                             "--chat-template", str(template_file)])
    yield s
    assert s.stop() == 0, s.output()


@pytest.fixture(scope="module")
def coder(pagellm_bin, tmp_path_factory):
    """A tiny random model with StarCoder's vocabulary (<fim_prefix> ...), and
    a 64-token batch so that /infill cuts the prefix and suffix."""
    path = tmp_path_factory.mktemp("coder") / "starcoder-vocab.gguf"
    subprocess.run([pagellm_bin, "make-model", "--n-embd", "64", "--n-layer", "2", "--n-head", "2",
                    "--n-head-kv", "2", "--n-ff", "128", "--n-ctx", "1024", "--type", "q8_0",
                    "--vocab-from", str(STARCODER), "-o", str(path)],
                   check=True, capture_output=True, timeout=300)
    s = Server(pagellm_bin, ["-m", str(path), "--max-batched-tokens", "64"])
    yield s
    assert s.stop() == 0, s.output()


# --- /tokenize and /detokenize ----------------------------------------------------------

def test_tokenize_matches_the_vectors(coder):
    cases = vector_cases("starcoder")
    assert len(cases) == 46
    for text, expected in cases:
        assert tokenize(coder, text) == expected, repr(text)


def test_tokenize_detokenize_round_trips_200_vector_strings(coder):
    texts = sorted({t for name in ("starcoder", "gpt-2", "llama-spm", "phi-3", "bert-bge", "mpt",
                                   "refact", "deepseek-llm") for t, _ in vector_cases(name)})
    # Every vocabulary has the same 46 strings: the rest are pairs of them.
    rng = random.Random(7)
    base = list(texts)
    while len(texts) < 200:
        texts.append(rng.choice(base) + rng.choice(base))
    for text in texts[:200]:
        r = post(coder, "/tokenize", {"content": text, "parse_special": False, "with_pieces": True})
        assert r.status_code == 200, r.text
        items = r.json()["tokens"]
        # Byte-level BPE loses nothing: the pieces are the text's bytes.
        pieces = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"])
                          for p in items)
        assert pieces == text.encode(), repr(text)
        for p in items:
            assert isinstance(p["piece"], str) or all(0 <= b < 256 for b in p["piece"])
        ids = [p["id"] for p in items]
        assert tokenize(coder, text) == ids
        back = post(coder, "/detokenize", {"tokens": ids})
        assert back.status_code == 200 and back.json() == {"content": text}, repr(text)


def test_tokenize_special_tokens(coder, stories):
    tokens = gguf_tokens(STARCODER)
    fim_prefix = tokens.index("<fim_prefix>")
    assert tokenize(coder, "<fim_prefix>x", parse_special=True)[0] == fim_prefix
    assert fim_prefix not in tokenize(coder, "<fim_prefix>x", parse_special=False)
    # The default parses special tokens, as llama-server's does.
    r = post(coder, "/tokenize", {"content": "<fim_prefix>"})
    assert r.json()["tokens"] == [fim_prefix]
    assert post(coder, "/detokenize", {"tokens": [fim_prefix]}).json() == {"content": "<fim_prefix>"}
    # add_special: the SentencePiece vocabulary starts with its BOS.
    r = gguf.GGUFReader(str(STORIES))
    f = r.fields["tokenizer.ggml.bos_token_id"]
    bos = int(f.parts[f.data[0]][0])
    plain = tokenize(stories, "Once upon a time")
    assert tokenize(stories, "Once upon a time", add_special=True) == [bos] + plain
    assert post(stories, "/tokenize", {"content": ""}).json() == {"tokens": []}


def test_tokenize_pieces_of_partial_characters_are_bytes(stories):
    # 'á' on stories260K: two byte tokens, neither valid UTF-8 alone.
    items = post(stories, "/tokenize", {"content": "á", "with_pieces": True}).json()["tokens"]
    byte_pieces = [p["piece"] for p in items if isinstance(p["piece"], list)]
    assert byte_pieces == [[0xC3], [0xA1]], items


@pytest.mark.parametrize("path,body,param", [
    ("/tokenize", {}, "content"),
    ("/tokenize", {"content": 5}, "content"),
    ("/tokenize", {"content": ["a"]}, "content"),
    ("/tokenize", {"content": "a", "with_pieces": "yes"}, "with_pieces"),
    ("/tokenize", {"content": "a", "add_special": 1}, "add_special"),
    ("/tokenize", {"content": "a", "parse_special": None, "with_pieces": 0}, "with_pieces"),
    ("/detokenize", {}, "tokens"),
    ("/detokenize", {"tokens": "1 2"}, "tokens"),
    ("/detokenize", {"tokens": [1, 2.5]}, "tokens"),
    ("/detokenize", {"tokens": [1, "2"]}, "tokens"),
    ("/detokenize", {"tokens": [-1]}, "tokens"),
    ("/detokenize", {"tokens": [512]}, "tokens"),
    ("/detokenize", {"tokens": [2 ** 64 - 1]}, "tokens"),
    ("/apply-template", {}, "messages"),
    ("/apply-template", {"messages": []}, "messages"),
    ("/apply-template", {"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ("/apply-template", {"messages": [{"role": "user", "content": "x"}], "tools": 5}, "tools"),
    ("/infill", {"input_prefix": 3}, "input_prefix"),
    ("/infill", {"input_suffix": ["x"]}, "input_suffix"),
    ("/infill", {"prompt": {"a": 1}}, "prompt"),
    ("/infill", {"input_extra": {"text": "x"}}, "input_extra"),
    ("/infill", {"input_extra": ["x"]}, "input_extra[0]"),
    ("/infill", {"input_extra": [{"filename": "a.py"}]}, "input_extra[0].text"),
    ("/infill", {"input_extra": [{"text": "x", "filename": 5}]}, "input_extra[0].filename"),
    ("/infill", {"n_predict": "4"}, "n_predict"),
    ("/infill", {"n_predict": 0}, "n_predict"),
    ("/infill", {"temperature": 9}, "temperature"),
    ("/infill", {"repeat_penalty": -1}, "repeat_penalty"),
    ("/infill", {"stop": 3}, "stop"),
])
def test_bad_input(stories, path, body, param):
    assert_error(post(stories, path, body), 400, param=param)


@pytest.mark.parametrize("path", ["/tokenize", "/detokenize", "/apply-template", "/infill"])
@pytest.mark.parametrize("raw", [b"{", b"[1]", b"\"x\"", b"\xff"])
def test_malformed_bodies(stories, path, raw):
    assert_error(post(stories, path, raw), 400)


def test_detokenize_out_of_vocabulary_names_the_id(stories):
    assert_error(post(stories, "/detokenize", {"tokens": [3, 99999]}), 400, param="tokens",
                 code="invalid_token_id", contains=("99999",))


# --- /apply-template ------------------------------------------------------------------

CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "And?"}]


def test_apply_template_renders_as_jinja2_does(stories):
    r = post(stories, "/apply-template", {"messages": CONVERSATION})
    assert r.status_code == 200, r.text
    expected = jinja2.Environment().from_string(TEMPLATE).render(
        messages=CONVERSATION, add_generation_prompt=True)
    assert r.json() == {"prompt": expected}


def test_apply_template_is_what_chat_renders(stories):
    tools = [{"type": "function", "function": {"name": "get_time", "description": "The time",
                                               "parameters": {"type": "object", "properties": {}}}}]
    for extra in ({}, {"tools": tools}):
        prompt = post(stories, "/apply-template", {"messages": CONVERSATION, **extra}).json()["prompt"]
        chat = post(stories, "/v1/chat/completions",
                    {"messages": CONVERSATION, "max_tokens": 1, **extra})
        assert chat.status_code == 200, chat.text
        # The chat endpoint adds BOS to the rendered text (the template writes none).
        ids = tokenize(stories, prompt, add_special=True, parse_special=True)
        assert chat.json()["usage"]["prompt_tokens"] == len(ids), (extra, prompt)
    with_tools = post(stories, "/apply-template", {"messages": CONVERSATION, "tools": tools}).json()
    assert "get_time" in with_tools["prompt"]


# --- /props and /slots ----------------------------------------------------------------

def test_props(stories, template_file):
    r = requests.get(stories.url + "/props", timeout=10)
    assert r.status_code == 200, r.text
    p = r.json()
    plan = requests.get(stories.url + "/v1/plan", timeout=10).json()
    model = requests.get(stories.url + "/v1/models", timeout=10).json()["data"][0]
    for key in ("default_generation_settings", "total_slots", "model_path", "chat_template",
                "build_info", "modalities"):
        assert key in p
    assert p["model_path"] == plan["model"]["path"]
    assert p["model_alias"] == "stories" == model["id"]
    assert p["total_slots"] == plan["max_num_seqs"] > 0
    assert p["n_ctx"] == p["default_generation_settings"]["n_ctx"] == model["max_model_len"]
    assert p["chat_template"] == template_file.read_text()
    assert p["build_info"] == model["pagellm_version"] != ""
    params = p["default_generation_settings"]["params"]
    for key in ("temperature", "top_k", "top_p", "min_p", "n_predict", "seed", "stop"):
        assert key in params
    assert assert_error(post(stories, "/props", {}), 405)["message"]


def test_slots_off_by_default(coder):
    err = assert_error(requests.get(coder.url + "/slots", timeout=10), 501)
    assert "--slots" in err["message"]


def test_slots_idle(stories):
    r = requests.get(stories.url + "/slots", timeout=10)
    assert r.status_code == 200 and r.json() == [], r.text


def test_slots_and_metrics_during_a_long_prefill(start_server, slow_model):
    """A long prompt is one step of seconds: /slots shows it and /metrics counts
    it running before its first token (it used to say 0 until the step ended)."""
    srv = start_server("-c", "4096", "--slots", model=slow_model)
    prompt = " ".join(random.Random(1).choice(["one", "upon", "time", "there", "was", "a", "little",
                                               "dog", "cat", "big", "tree"]) for _ in range(3000))
    first_token_at = []
    started = time.monotonic()

    def run():
        with requests.post(srv.url + "/v1/completions", stream=True, timeout=300,
                           json={"prompt": prompt, "max_tokens": 3, "stream": True}) as r:
            for line in r.iter_lines():
                if line.startswith(b"data: {") and b'"text"' in line:
                    first_token_at.append(time.monotonic())
                    break
    t = threading.Thread(target=run)
    t.start()
    samples = []
    while t.is_alive() and not first_token_at:
        m = srv.metrics()
        slots = requests.get(srv.url + "/slots", timeout=30).json()
        samples.append((time.monotonic(), m.get("pagellm_requests_running"), slots))
        time.sleep(0.05)
    t.join(300)
    assert first_token_at, srv.output()
    end = first_token_at[0]
    assert end - started > 1.0, "the prefill was too quick to test"
    # Running while the prompt was still being computed, well before the first token.
    early = [s for s in samples if s[0] < end - 0.5]
    assert any(running == 1 for _, running, _ in early), samples
    seen = [slots[0] for _, _, slots in early if slots]
    assert seen, samples
    for slot in seen:
        assert {"id", "n_ctx", "state", "n_prompt_tokens", "n_tokens", "is_processing",
                "next_token"} <= set(slot)
        assert slot["n_tokens"] >= slot["n_prompt_tokens"] > 1000
        assert slot["n_ctx"] == requests.get(srv.url + "/props", timeout=10).json()["n_ctx"]
    assert any(slot["state"] == "prefill" for slot in seen), seen


# --- /infill --------------------------------------------------------------------------

def test_infill_refused_without_fim_tokens(stories):
    err = assert_error(post(stories, "/infill", {"input_prefix": "def f(", "input_suffix": ")"}),
                       400, code="fim_not_supported")
    for what in ("FIM_PRE", "FIM_SUF", "FIM_MID"):
        assert what in err["message"]


def expected_infill_ids(srv, body, n_batch, n_ctx):
    """llama-server's FIM prompt for StarCoder's vocabulary (no repo/file tokens), built here."""
    tokens = gguf_tokens(STARCODER)
    pre, suf, mid = (tokens.index(t) for t in ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"))
    assert "<reponame>" not in tokens and "<|file_sep|>" not in tokens

    def ids(text):
        return tokenize(srv, text, add_special=False, parse_special=False)
    extra = []
    for chunk in body.get("input_extra", []):
        extra += ids("\n\n--- snippet ---\n\n") + ids(chunk["text"])
    prefix, suffix, prompt = ids(body.get("input_prefix", "")), ids(body.get("input_suffix", "")), \
        ids(body.get("prompt", ""))
    n_predict = body.get("n_predict", -1)
    take_prefix = min(len(prefix), 3 * (n_batch // 4))
    take_suffix = min(len(suffix), max(0, n_batch // 4 - (2 + len(prompt))))
    take_extra = min(max(0, n_ctx - n_batch - 2 * n_predict), len(extra))
    bos = tokenize(srv, "", add_special=True)  # [] when the vocabulary adds no BOS
    return (extra[len(extra) - take_extra:] + bos + [pre] + prefix[len(prefix) - take_prefix:] +
            prompt + [suf] + suffix[:take_suffix] + [mid])


def test_infill_prompt_as_llama_server_builds_it(coder):
    n_batch = requests.get(coder.url + "/v1/plan", timeout=10).json()["server"]["max_batched_tokens"]
    n_ctx = requests.get(coder.url + "/props", timeout=10).json()["n_ctx"]
    assert n_batch == 64
    long_prefix = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(40))
    bodies = [
        {"input_prefix": "def add(a, b):\n    return ", "input_suffix": "\n\nprint(add(1, 2))\n"},
        {"input_prefix": long_prefix, "input_suffix": long_prefix, "prompt": "    # note",
         "input_extra": [{"filename": "a.py", "text": "import os\n"}, {"text": "X = 1\n"}]},
        {"input_prefix": "", "input_suffix": "", "n_predict": 2},
    ]
    for body in bodies:
        body = {"n_predict": 3, "temperature": 0, "ignore_eos": True, **body}
        expected = expected_infill_ids(coder, body, n_batch, n_ctx)
        r = post(coder, "/infill", body)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["tokens_evaluated"] == len(expected), (body, out)
        shown = post(coder, "/detokenize", {"tokens": expected}).json()["content"]
        assert out["prompt"] == shown
        assert out["stop"] is True and out["model"] == "starcoder-vocab"
        assert out["stop_type"] in ("eos", "limit", "word")
        assert out["tokens_predicted"] == body["n_predict"]


def test_infill_streamed_equals_whole(coder):
    body = {"input_prefix": "for i in range(", "input_suffix": "):\n    pass\n", "n_predict": 6,
            "temperature": 0, "ignore_eos": True}
    whole = post(coder, "/infill", body).json()
    events = []
    with post(coder, "/infill", {**body, "stream": True}, stream=True) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith(b"data: "):
                events.append(json.loads(line[6:]))
    assert events and events[-1]["stop"] is True
    assert all(e["stop"] is False for e in events[:-1])
    assert "".join(e["content"] for e in events) == whole["content"]
    assert events[-1]["tokens_predicted"] == whole["tokens_predicted"] == 6
    assert events[-1]["stop_type"] == "limit"


# --- model names, the route table, /health, /favicon.ico ---------------------------------

def test_any_model_name_is_answered_by_the_loaded_model(stories):
    for path, body, field in [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2}, "model"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 2}, "model"),
        ("/v1/responses", {"input": "x", "max_output_tokens": 2}, "model"),
        ("/v1/messages", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2}, "model"),
    ]:
        for name in ("gpt-4o", "claude-3-5-sonnet", "stories"):
            r = post(stories, path, {"model": name, **body})
            assert r.status_code == 200, (path, name, r.text)
            assert r.json()[field] == "stories", (path, name)
    assert requests.get(stories.url + "/v1/models/gpt-4o", timeout=10).status_code == 404


def test_methods_key_and_preflight_come_from_the_table(start_server):
    srv = start_server("--api-key", "k", "--cors-origin", "http://a.test", "--slots")
    auth = {"Authorization": "Bearer k"}
    for path in ("/tokenize", "/detokenize", "/apply-template", "/infill"):
        assert_error(post(srv, path, {}), 401)
        r = requests.get(srv.url + path, headers=auth, timeout=10)
        assert_error(r, 405)
        assert r.headers["Allow"] == "POST"
        pre = requests.options(srv.url + path, timeout=10, headers={
            "Origin": "http://a.test", "Access-Control-Request-Method": "POST"})
        assert pre.status_code == 204
        assert pre.headers["Access-Control-Allow-Origin"] == "http://a.test"
    for path in ("/props", "/slots"):
        assert requests.get(srv.url + path, timeout=10).status_code == 401
        assert requests.get(srv.url + path, headers=auth, timeout=10).status_code == 200
        r = requests.delete(srv.url + path, headers=auth, timeout=10)
        assert_error(r, 405)
        assert r.headers["Allow"] == "GET"
    assert post(srv, "/tokenize", {"content": "a"}, headers=auth).status_code == 200
    # Open as before: /health, /metrics, the page and its icon.
    for path in ("/health", "/metrics", "/", "/favicon.ico"):
        assert requests.get(srv.url + path, timeout=10).status_code == 200, path
    assert requests.get(srv.url + "/v1/nothing", timeout=10).status_code == 401


def test_health_polls_stay_out_of_the_access_log(start_server):
    srv = start_server("--debug-load-delay-ms", "1500", wait_ready=False)
    assert requests.get(srv.url + "/health", timeout=10).status_code == 503
    srv.wait_ready()
    for _ in range(5):
        assert requests.get(srv.url + "/health", timeout=10).status_code == 200
    assert requests.get(srv.url + "/v1/models", timeout=10).status_code == 200
    srv.wait_access(lambda e: e.get("path") == "/v1/models")
    health = [e for e in srv.access_log() if e.get("path") == "/health"]
    assert health and all(e["status"] == 503 for e in health), health
    # Still counted.
    assert srv.metrics()['pagellm_http_requests_total{route="/health",status="200"}'] >= 5


def test_favicon(start_server):
    srv = start_server()
    r = requests.get(srv.url + "/favicon.ico", timeout=10)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "image/svg+xml"
    assert r.text.startswith("<svg") and len(r.content) < 2048
    off = start_server("--no-webui")
    assert requests.get(off.url + "/favicon.ico", timeout=10).status_code == 404
