"""Chat prompts are rendered with the model's chat template (or --chat-template)."""
import json
import subprocess

import pytest
import requests

from conftest import DATA

PHI3_VOCAB = DATA / "tokenizer-vectors" / "ggml-vocab-phi-3.gguf"


@pytest.fixture(scope="module")
def phi3_model(pagellm_bin, tmp_path_factory):
    """A tiny random-weight model with phi-3's vocabulary and chat template
    ({{ bos_token }} + <|user|>/<|end|>/<|assistant|> turns)."""
    path = tmp_path_factory.mktemp("phi3") / "phi3-tiny.gguf"
    subprocess.run([pagellm_bin, "make-model", "--n-embd", "64", "--n-layer", "2", "--n-head", "2",
                    "--n-head-kv", "2", "--n-ff", "128", "--n-ctx", "1024", "--type", "q8_0",
                    "--vocab-from", str(PHI3_VOCAB), "-o", str(path)],
                   check=True, capture_output=True, timeout=300)
    return path


def token_count(pagellm_bin, model, text):
    out = subprocess.run([pagellm_bin, "tokenize", "-m", str(model), "--parse-special", "--no-bos",
                          "--json", "--text", text], check=True, capture_output=True, text=True,
                         timeout=60)
    return len(json.loads(out.stdout)["ids"])


def chat(srv, messages, **extra):
    return requests.post(srv.url + "/v1/chat/completions", timeout=60,
                         json={"messages": messages, "max_tokens": 2, **extra})


def test_model_template_with_its_own_bos(start_server, phi3_model, pagellm_bin):
    srv = start_server(model=phi3_model)
    assert "chat template from the model," in srv.wait_output("chat template")
    r = chat(srv, [{"role": "user", "content": "Hello"}])
    assert r.status_code == 200, r.text
    # The template writes <s> itself: no second BOS.
    expected = "<s><|user|>\nHello<|end|>\n<|assistant|>\n"
    assert r.json()["usage"]["prompt_tokens"] == token_count(pagellm_bin, phi3_model, expected)
    r = chat(srv, [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yes"},
                   {"role": "user", "content": "More"}])
    expected = "<s><|user|>\nHi<|end|>\n<|assistant|>\nYes<|end|>\n<|user|>\nMore<|end|>\n" \
               "<|assistant|>\n"
    assert r.json()["usage"]["prompt_tokens"] == token_count(pagellm_bin, phi3_model, expected)


def test_template_override_and_refusal(start_server, tmp_path, pagellm_bin):
    tmpl = tmp_path / "strict.jinja"
    tmpl.write_text("{% if messages[0]['role'] == 'system' %}"
                    "{{ raise_exception('system messages are not allowed') }}{% endif %}"
                    "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
                    "[assistant] ")
    srv = start_server("--chat-template", str(tmpl))
    r = chat(srv, [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])
    assert r.status_code == 400
    err = r.json()["error"]
    assert "system messages are not allowed" in err["message"]
    assert err["param"] == "messages"
    r = chat(srv, [{"role": "user", "content": "Hello"}])
    assert r.status_code == 200
    expected = "[user] Hello\n[assistant] "
    # The shipped model's vocabulary adds BOS, which this template does not write.
    assert r.json()["usage"]["prompt_tokens"] == \
        token_count(pagellm_bin, DATA / "stories260K.gguf", expected) + 1
    chatml = start_server("--chat-template", "chatml")
    r = chat(chatml, [{"role": "user", "content": "Hello"}])
    assert r.status_code == 200
