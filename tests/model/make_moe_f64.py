#!/usr/bin/env python3
# An independent float64 forward pass of the qwen3moe golden model (weights
# dequantized with the `gguf` package, numpy in float64, no activation
# quantization): the last prompt logits of each case of its llama.cpp JSON,
# and the smallest router margin (k-th minus (k+1)-th logit) any token met.
# Writes tests/data/golden/f64/<name>.json. Needs numpy and gguf from PyPI:
#
#   python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy gguf
#   /tmp/venv/bin/python tests/model/make_moe_f64.py \
#       tests/data/golden/arch/rand-qwen3moe-tok512-Q8_0.gguf \
#       tests/data/golden/arch/rand-qwen3moe-tok512-Q8_0.json
import json, os, sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import f64_reference as ref64  # the shared float64 pieces (GGUF reading, norms, RoPE, attention)

path = sys.argv[1]; ref = json.load(open(sys.argv[2]))
model = ref64.Model(path)
val, W = model.val, model.W
arch = "qwen3moe"
E = int(val(f"{arch}.embedding_length")); L = int(val(f"{arch}.block_count"))
H = int(val(f"{arch}.attention.head_count")); HKV = int(val(f"{arch}.attention.head_count_kv"))
D = int(val(f"{arch}.attention.key_length")); X = int(val(f"{arch}.expert_count")); K = int(val(f"{arch}.expert_used_count"))
eps = float(val(f"{arch}.attention.layer_norm_rms_epsilon")); base = float(val(f"{arch}.rope.freq_base"))
def rms(x, w): return ref64.rms(x, w, eps)
def rope_neox(x, pos): return ref64.rope_neox(x, pos, base, D)  # x [n, heads, D]
def forward(ids):
    n = len(ids); pos = np.arange(n, dtype=np.float64)
    x = W("token_embd.weight")[ids]
    margins = []
    for l in range(L):
        p = f"blk.{l}."
        h = rms(x, W(p + "attn_norm.weight"))
        q = (h @ W(p + "attn_q.weight").T).reshape(n, H, D)
        k = (h @ W(p + "attn_k.weight").T).reshape(n, HKV, D)
        v = (h @ W(p + "attn_v.weight").T).reshape(n, HKV, D)
        q = rms(q, W(p + "attn_q_norm.weight")); k = rms(k, W(p + "attn_k_norm.weight"))
        q = rope_neox(q, pos); k = rope_neox(k, pos)
        o = ref64.causal_attention(q, k, v, D)
        x = x + o @ W(p + "attn_output.weight").T
        h = rms(x, W(p + "ffn_norm.weight"))
        logits = h @ W(p + "ffn_gate_inp.weight").T
        pr = np.exp(logits - logits.max(-1, keepdims=True)); pr /= pr.sum(-1, keepdims=True)
        out = np.zeros_like(x)
        G, U, Dn = W(p + "ffn_gate_exps.weight"), W(p + "ffn_up_exps.weight"), W(p + "ffn_down_exps.weight")
        for t in range(n):
            order = np.argsort(-pr[t], kind="stable")
            srt = np.sort(logits[t])[::-1]; margins.append(srt[K - 1] - srt[K])
            sel = order[:K]; w = pr[t, sel] / pr[t, sel].sum()
            for e, we in zip(sel, w):
                g = G[e] @ h[t]; u = U[e] @ h[t]
                a = g / (1 + np.exp(-g)) * u
                out[t] += we * (Dn[e] @ a)
        x = x + out
    x = rms(x, W("output_norm.weight"))
    return x[-1] @ W("output.weight").T, min(margins)
cases = []
for c in ref["cases"]:
    ids = c["prompt_ids"]
    lg, m = forward(ids)
    llama = np.array(c["kv_f32"]["last_logits"])
    print(len(ids), "tokens: f64 vs llama.cpp %.4f" % np.abs(lg - llama).max(),
          "min router margin %.2e" % m)
    cases.append({"prompt_ids": ids, "f64_last_logits": [float(v) for v in lg],
                  "min_router_margin": float(m)})
name = os.path.basename(path)[:-len(".gguf")]
out = os.path.join(os.path.dirname(__file__), "..", "data", "golden", "f64", name + ".json")
with open(out, "w") as f:
    json.dump({"format": {"source": "tests/model/make_moe_f64.py: float64 numpy forward pass over "
                          "the dequantized weights of " + name + ".gguf",
                          "f64_last_logits": "logits at the last prompt position",
                          "min_router_margin": "smallest k-th minus (k+1)-th router logit met"},
               "cases": cases}, f)
print("wrote", out)
