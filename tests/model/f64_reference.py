"""Pieces of an independent float64 forward pass over a GGUF's dequantized
weights (numpy, and the `gguf` package from PyPI to read and dequantize),
shared by tests/model/make_moe_f64.py and the server's embedding test.
Nothing here comes from pagellm: only the file format and the published
architectures.
"""
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class Model:
    """A GGUF's metadata (`val`) and every tensor dequantized to float64
    (`W`), 2-D tensors as [rows, row length] (the [out, in] of a matmul)."""

    def __init__(self, path):
        r = GGUFReader(path)
        self.kv = {f.name: f for f in r.fields.values()}
        self.T = {}
        for t in r.tensors:
            a = dequantize(t.data, t.tensor_type).astype(np.float64)
            self.T[t.name] = a.reshape([int(x) for x in reversed(t.shape)]) if a.ndim == 1 else a

    def has(self, key):
        return key in self.kv

    def val(self, key):
        f = self.kv[key]
        return f.parts[f.data[0]][0]

    def W(self, name):
        return self.T[name]


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope_neox(x, pos, base, D):
    """x [n, heads, D]: rotates the pairs (i, i + D/2) (NeoX style)."""
    half = D // 2
    inv = base ** (-np.arange(half) * 2.0 / D)
    ang = pos[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def rope_pairs(x, pos, base, D):
    """x [n, heads, D]: rotates the adjacent pairs (2i, 2i + 1) (Llama's GGUF layout)."""
    inv = base ** (-np.arange(D // 2) * 2.0 / D)
    ang = pos[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def causal_attention(q, k, v, D):
    """q [n, H, D], k and v [n, HKV, D] (grouped: head h reads kv head h // (H / HKV))."""
    n, H = q.shape[0], q.shape[1]
    rep = H // k.shape[1]
    k = np.repeat(k, rep, 1); v = np.repeat(v, rep, 1)
    s = np.einsum("thd,shd->hts", q, k) / np.sqrt(D)
    s = s + np.triu(np.full((n, n), -np.inf), 1)[None]
    s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
    return np.einsum("hts,shd->thd", s, v).reshape(n, H * D)


def llama_hidden(m, ids):
    """A dense `llama` model's final-normed hidden states [n, n_embd] (the
    rows the output head multiplies) for the prompt `ids`."""
    a = "llama"
    L = int(m.val(f"{a}.block_count")); H = int(m.val(f"{a}.attention.head_count"))
    HKV = int(m.val(f"{a}.attention.head_count_kv"))
    E = int(m.val(f"{a}.embedding_length")); D = E // H
    eps = float(m.val(f"{a}.attention.layer_norm_rms_epsilon"))
    base = float(m.val(f"{a}.rope.freq_base")) if m.has(f"{a}.rope.freq_base") else 10000.0
    n = len(ids); pos = np.arange(n, dtype=np.float64)
    x = m.W("token_embd.weight")[ids]
    for l in range(L):
        p = f"blk.{l}."
        h = rms(x, m.W(p + "attn_norm.weight"), eps)
        q = rope_pairs((h @ m.W(p + "attn_q.weight").T).reshape(n, H, D), pos, base, D)
        k = rope_pairs((h @ m.W(p + "attn_k.weight").T).reshape(n, HKV, D), pos, base, D)
        v = (h @ m.W(p + "attn_v.weight").T).reshape(n, HKV, D)
        x = x + causal_attention(q, k, v, D) @ m.W(p + "attn_output.weight").T
        h = rms(x, m.W(p + "ffn_norm.weight"), eps)
        g = h @ m.W(p + "ffn_gate.weight").T
        x = x + (g / (1 + np.exp(-g)) * (h @ m.W(p + "ffn_up.weight").T)) @ m.W(p + "ffn_down.weight").T
    return rms(x, m.W("output_norm.weight"), eps)
