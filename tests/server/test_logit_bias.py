"""logit_bias through the server, on the shipped model (stories260K, 512
tokens): +100 on a token makes every sampled token that token (its text
taken from `pagellm tokenize`, not from the server); -100 on the token
greedy decoding picks (found by banning halves of the vocabulary) changes
the reply; bad values are 400s naming logit_bias. Both endpoints."""
import json
import subprocess

import pytest
import requests

from conftest import STORIES

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
N_VOCAB = 512
MSGS = [{"role": "user", "content": "Tell me a story"}]


def body_for(path, **extra):
    base = {"messages": MSGS} if path == CHAT else {"prompt": "Once upon a time"}
    return {**base, **extra}


def generated_tokens(server, path, body):
    """The texts of the reply's tokens (from logprobs)."""
    lp = {"logprobs": True} if path == CHAT else {"logprobs": 0}
    r = requests.post(server.url + path, json={**body, **lp}, timeout=60)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    if path == CHAT:
        return [t["token"] for t in choice["logprobs"]["content"]]
    return choice["logprobs"]["tokens"]


def pieces_of(pagellm_bin, text):
    out = subprocess.run([pagellm_bin, "tokenize", "-m", str(STORIES), "--no-bos", "--json",
                          "--text", text], check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return dict(zip(j["ids"], j["pieces"]))


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
def test_plus_hundred_forces_the_token(server, pagellm_bin, path):
    pieces = pieces_of(pagellm_bin, "The little cat and the big dog")
    forced = [i for i, p in pieces.items() if p.strip().isalpha()][:2]
    assert len(forced) == 2
    for tok in forced:
        for seed in (1, 2, 3):
            toks = generated_tokens(server, path, body_for(
                path, max_tokens=6, temperature=1.0, seed=seed, logit_bias={str(tok): 100}))
            assert toks == [pieces[tok]] * 6, (tok, pieces[tok], toks)
    # The array form (llama-server's) too.
    toks = generated_tokens(server, path, body_for(path, max_tokens=4, temperature=1.2, seed=9,
                                                   logit_bias=[[forced[0], 100]]))
    assert toks == [pieces[forced[0]]] * 4


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
def test_minus_hundred_on_the_greedy_token_changes_the_reply(server, path):
    greedy = body_for(path, max_tokens=8, temperature=0)
    plain = generated_tokens(server, path, greedy)

    def first_with_ban(ids):
        bias = {str(i): -100 for i in ids}
        return generated_tokens(server, path, {**greedy, "logit_bias": bias})[0]

    # Banning a set changes the first token exactly when the greedy one is in it.
    lo, hi = 0, N_VOCAB
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if first_with_ban(range(lo, mid)) != plain[0]:
            hi = mid
        else:
            lo = mid
    banned = generated_tokens(server, path, {**greedy, "logit_bias": {str(lo): -100}})
    assert banned[0] != plain[0] and banned != plain
    # And +100 on it makes every token that one.
    forced = generated_tokens(server, path, {**greedy, "logit_bias": {str(lo): 100}})
    assert forced == [plain[0]] * 8


@pytest.mark.parametrize("bias,contains", [
    ({"1": 101}, "[-100, 100]"),
    ({"1": -100.5}, "[-100, 100]"),
    ({"1": "5"}, "number"),
    ({"1": None}, "number"),
    ({"1": True}, "number"),
    ({"cat": 1}, "token ids"),
    ({"-1": 1}, "token ids"),
    ({"01": 1}, "token ids"),
    ({str(N_VOCAB): 1}, str(N_VOCAB)),
    ({"99999999999": 1}, "token ids"),
    ([[1, 5], [1, 6]], "twice"),
    ([[1]], "pairs"),
    ([["a", 1]], "pairs"),
    ([[-3, 1]], "-3"),
    ("x", "object"),
    (5, "object"),
])
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
def test_bad_logit_bias_is_400(server, path, bias, contains):
    r = requests.post(server.url + path, json=body_for(path, max_tokens=2, logit_bias=bias),
                      timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "logit_bias", err
    assert contains in err["message"], err
