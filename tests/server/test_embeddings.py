"""POST /v1/embeddings: OpenAI's shapes (through the official client too),
bad input in OpenAI's error shape, KV blocks given back, batch invariance,
and the vectors against an independent float64 pass (numpy over the random
llama model's weights, tests/model/f64_reference.py)."""
import base64
import json
import math
import pathlib
import struct
import subprocess
import sys

import pytest
import requests

from test_errors import assert_error
from test_real_model import smollm2  # noqa: F401 (the fixture)

ROOT = pathlib.Path(__file__).resolve().parents[2]
RAND_LLAMA = ROOT.parent / "shared" / "golden" / "random" / "rand-llama-tok512-F32.gguf"
EMB = "/v1/embeddings"


def post(server, body, raw=False):
    return requests.post(server.url + EMB, data=body if raw else json.dumps(body), timeout=120,
                         headers={"Content-Type": "application/json"})


def vectors(server, inputs, **extra):
    r = post(server, {"input": inputs, "model": "anything", **extra})
    assert r.status_code == 200, r.text
    return r.json()


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


def tokenize(pagellm_bin, model, text):
    out = subprocess.run([pagellm_bin, "tokenize", "-m", str(model), "--json", "--text", text],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)["ids"]


def test_not_enabled(server):
    err = assert_error(post(server, {"input": "hello", "model": "m"}), 400,
                       code="embeddings_not_enabled")
    assert "--embeddings" in err["message"]


@pytest.fixture(scope="module")
def emb_server(pagellm_bin):
    from conftest import STORIES, Server
    # A small context, so that "over the context" is cheap to ask for.
    s = Server(pagellm_bin, ["-m", str(STORIES), "--alias", "stories", "--embeddings",
                             "-c", "64"])
    yield s
    assert s.stop() == 0, s.output()


@pytest.mark.parametrize("body,param,code", [
    ({}, "input", None),
    ({"input": None}, "input", None),
    ({"input": ""}, "input", None),
    ({"input": []}, "input", None),
    ({"input": [[]]}, "input[0]", None),
    ({"input": ["a", ""]}, "input[1]", None),
    ({"input": 5}, "input", None),
    ({"input": {"text": "a"}}, "input", None),
    ({"input": True}, "input", None),
    ({"input": ["a", 1]}, "input[1]", None),
    ({"input": [1, "a"]}, "input", None),
    ({"input": [1.5]}, "input", None),
    ({"input": [[1, 2], "a"]}, "input[1]", None),
    ({"input": [[1, [2]]]}, "input[0]", None),
    ({"input": [None]}, "input[0]", None),
    ({"input": "a", "model": 3}, "model", None),
    ({"input": "a", "encoding_format": "hex"}, "encoding_format", None),
    ({"input": "a", "encoding_format": 1}, "encoding_format", None),
    ({"input": "a", "dimensions": 8}, "dimensions", "unsupported_parameter"),
    ({"input": [512]}, "input", "invalid_token_id"),
    ({"input": [-1]}, "input", "invalid_token_id"),
    ({"input": [[1, 2], [1, 99999999999]]}, "input[1]", "invalid_token_id"),
    ({"input": [1] * 65}, "input", "context_length_exceeded"),
    ({"input": ["short", "word " * 80]}, "input[1]", "context_length_exceeded"),
    ({"input": ["a"] * 2049}, "input", None),
])
def test_bad_input(emb_server, body, param, code):
    assert_error(post(emb_server, body), 400, param=param, code=code)


@pytest.mark.parametrize("raw", [b"{", b"", b"[1]", b"\"input\"", b"{\"input\": 1e999}"])
def test_bad_body(emb_server, raw):
    assert_error(post(emb_server, raw, raw=True), 400)


def test_the_whole_context_fits(emb_server):
    # An embedding generates nothing: an input may fill the context.
    out = vectors(emb_server, [1] * 64)
    assert out["usage"] == {"prompt_tokens": 64, "total_tokens": 64}


def test_shape_usage_and_encodings(emb_server, pagellm_bin):
    from conftest import STORIES
    texts = ["Once upon a time", "there was a little dog", "The sun"]
    out = vectors(emb_server, texts)
    assert out["object"] == "list" and out["model"] == "stories"
    ids = [tokenize(pagellm_bin, STORIES, t) for t in texts]
    n = sum(len(i) for i in ids)
    assert out["usage"] == {"prompt_tokens": n, "total_tokens": n}
    assert [d["index"] for d in out["data"]] == [0, 1, 2]
    floats = [d["embedding"] for d in out["data"]]
    for d, v in zip(out["data"], floats):
        assert d["object"] == "embedding"
        assert len(v) == 64  # stories260K's n_embd
        assert abs(norm(v) - 1) < 1e-5
    assert len({tuple(v) for v in floats}) == 3
    # base64: the same floats as little-endian float32.
    b64 = vectors(emb_server, texts, encoding_format="base64")
    for d, v in zip(b64["data"], floats):
        raw = base64.b64decode(d["embedding"], validate=True)
        assert list(struct.unpack(f"<{len(raw) // 4}f", raw)) == v
    # Token ids (the text's own) give the text's vector.
    by_ids = vectors(emb_server, ids)
    assert [d["embedding"] for d in by_ids["data"]] == floats
    assert vectors(emb_server, ids[0])["data"][0]["embedding"] == floats[0]


def test_batch_invariance_and_blocks_freed(emb_server):
    """An input's vector alone and within a batch of several inputs is the
    same bit for bit: the CPU kernels give each row the same arithmetic
    whatever else is in the batch (the speculative-decoding tests rely on the
    same), the final norm is per row, and the pooling sums each input's rows
    in position order in float64. JSON floats round-trip exactly, so ==
    compares the float32 values."""
    target = "a little girl named Lily"
    alone = vectors(emb_server, [target])["data"][0]["embedding"]
    others = ["the dog ran", "Once upon a time, there was a big tree", "she was happy", "sun"]
    batched = vectors(emb_server, others[:2] + [target] + others[2:])["data"]
    assert batched[2]["embedding"] == alone
    assert batched[0]["embedding"] == vectors(emb_server, others[0])["data"][0]["embedding"]
    # Every sequence gave its blocks back.
    emb_server.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0)


def test_beside_a_running_generation(start_server, slow_model):
    """The same vectors while a generation runs in the same steps; the
    generation goes on, and afterwards no block is held."""
    srv = start_server("--embeddings", model=slow_model)
    inputs = ["a little girl named Lily", "the dog ran"]
    alone = [d["embedding"] for d in vectors(srv, inputs)["data"]]
    stream = requests.post(srv.url + "/v1/completions", stream=True, timeout=120, json={
        "prompt": "Once upon a time", "max_tokens": 2000, "ignore_eos": True, "stream": True})
    lines = stream.iter_lines()
    assert next(line for line in lines if line.startswith(b"data: "))  # it is running
    for _ in range(3):
        assert [d["embedding"] for d in vectors(srv, inputs)["data"]] == alone
    assert srv.metrics()["pagellm_requests_running"] >= 1
    chunk = next(line for line in lines if line.startswith(b"data: "))
    assert b"[DONE]" not in chunk  # still generating after the embeddings came back
    stream.close()  # the client goes away: the generation is aborted
    srv.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0)


def test_many_inputs_go_through_in_waves(emb_server):
    # More inputs than a request keeps in flight at once (64).
    texts = [f"story number {i}" for i in range(150)]
    out = vectors(emb_server, texts)
    assert [d["index"] for d in out["data"]] == list(range(150))
    assert out["data"][149]["embedding"] == vectors(emb_server, texts[149])["data"][0]["embedding"]
    emb_server.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0)


def test_inputs_beyond_the_queue(start_server, emb_server):
    """More inputs than --max-queue: they go in smaller waves, not a 503."""
    srv = start_server("--embeddings", "--max-queue", "3", "-c", "64")
    texts = [f"the {i} little cats" for i in range(10)]
    got = [d["embedding"] for d in vectors(srv, texts)["data"]]
    assert got == [d["embedding"] for d in vectors(emb_server, texts)["data"]]
    srv.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0)


def f64_reference():
    """The float64 pass, or a skip saying why it cannot run."""
    if not RAND_LLAMA.exists():
        pytest.skip(f"{RAND_LLAMA} is not there (the shared golden models)")
    pytest.importorskip("numpy", reason="numpy (PyPI) runs the float64 reference")
    pytest.importorskip("gguf", reason="gguf (PyPI) reads the model for the float64 reference")
    sys.path.insert(0, str(ROOT / "tests" / "model"))
    import f64_reference as ref
    return ref


@pytest.mark.parametrize("pooling", ["mean", "last", "cls"])
def test_random_llama_against_float64(start_server, pooling):
    ref = f64_reference()
    import numpy as np
    model = ref.Model(str(RAND_LLAMA))
    golden = json.loads(RAND_LLAMA.with_suffix(".json").read_text())
    prompts = [c["prompt_ids"] for c in golden["cases"]]
    args = ["--embeddings", "--kv-type", "f32"] + (["--pooling", pooling] if pooling != "mean" else [])
    srv = start_server(*args, model=RAND_LLAMA)
    out = vectors(srv, prompts)["data"]
    worst = 0.0
    for ids, d in zip(prompts, out):
        h = ref.llama_hidden(model, ids)
        pooled = {"mean": h.mean(0), "last": h[-1], "cls": h[0]}[pooling]
        expected = pooled / np.linalg.norm(pooled)
        got = np.array(d["embedding"])
        assert got.shape == expected.shape
        worst = max(worst, float(np.abs(got - expected).max()))
    print(f"\n{pooling} pooling, {len(prompts)} prompts: max |pagellm - float64| = {worst:.2e}")
    assert worst < 1e-5  # float32 kernels and KV: ~1e-7 here


SENTENCES = [
    "The cat sat on the mat and purred softly.",
    "A kitten curled up on the rug and purred.",
    "The central bank raised interest rates to fight inflation.",
]


def test_openai_client_on_smollm2(start_server, client_for, smollm2):  # noqa: F811
    srv = start_server("-c", "1024", "--embeddings", "--alias", "smollm2", model=smollm2)
    client = client_for(srv)
    # The client asks for base64 unless told otherwise, and decodes it.
    default = client.embeddings.create(model="whatever", input=SENTENCES)
    floats = client.embeddings.create(model="whatever", input=SENTENCES, encoding_format="float")
    assert default.model == "smollm2" and default.object == "list"
    assert default.usage.prompt_tokens == floats.usage.prompt_tokens > 0
    a, b, c = (list(map(float, d.embedding)) for d in default.data)
    assert [list(map(float, d.embedding)) for d in floats.data] == [a, b, c]
    for v in (a, b, c):
        assert len(v) == 576  # SmolLM2-135M's n_embd
        assert abs(norm(v) - 1) < 1e-5
    same, diff1, diff2 = cosine(a, b), cosine(a, c), cosine(b, c)
    print(f"\nSmolLM2 cosines: cats {same:.4f}, cat/bank {diff1:.4f}, kitten/bank {diff2:.4f}")
    assert same > diff1 and same > diff2
    assert same - max(diff1, diff2) > 0.1  # by a wide margin (0.94 against 0.56 when written)
