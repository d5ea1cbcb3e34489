"""pagellm serve on a hybrid model (qwen35 from make-model: gated delta-net
layers beside full attention): a chat completion and its stream give the same
reply, and a text completion gives `pagellm generate`'s greedy text."""
import json
import subprocess

import pytest

from conftest import STORIES

PROMPT = "Once upon a time, there was a little girl named Lily."


@pytest.fixture(scope="module")
def qwen35_model(pagellm_bin, tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "qwen35.gguf"
    subprocess.run([pagellm_bin, "make-model", "--arch", "qwen35", "--n-embd", "128", "--n-layer", "4",
                    "--n-head", "4", "--n-head-kv", "2", "--n-ff", "256", "--type", "q8_0",
                    "--vocab-from", str(STORIES), "--seed", "5", "-o", str(path)],
                   check=True, capture_output=True, timeout=300)
    return path


def test_chat_stream_and_completion(pagellm_bin, qwen35_model, start_server, client_for):
    server = start_server("--chat-template", "chatml", model=qwen35_model)
    client = client_for(server)
    messages = [{"role": "user", "content": "Tell me a story about a cat."}]
    whole = client.chat.completions.create(model="m", messages=messages, max_tokens=24,
                                           temperature=0)
    assert whole.choices[0].finish_reason == "length"
    assert whole.usage.completion_tokens == 24
    text = whole.choices[0].message.content
    assert text
    streamed, finish = "", None
    for chunk in client.chat.completions.create(model="m", messages=messages, max_tokens=24,
                                                temperature=0, stream=True):
        for c in chunk.choices:
            streamed += c.delta.content or ""
            finish = c.finish_reason or finish
    assert streamed == text
    assert finish == "length"

    # The same greedy tokens as the CLI, which runs the model alone.
    r = client.completions.create(model="m", prompt=PROMPT, max_tokens=20, temperature=0)
    cli = subprocess.run([pagellm_bin, "generate", "-m", str(qwen35_model), "-p", PROMPT, "-n", "20",
                          "--temp", "0", "--ignore-eos", "--json"],
                         check=True, capture_output=True, text=True, timeout=120)
    assert r.choices[0].text == json.loads(cli.stdout)["text"]
