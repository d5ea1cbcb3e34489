#!/usr/bin/env python3
"""Writes the committed fuzz seeds under tests/fuzz/corpus/ (rerun to refresh).

gguf/           small GGUF files (each at most a few KB, under fuzz.sh's -max_len):
                headers, every metadata type, short arrays, tensor infos of
                several types, tiny vocabularies of each tokenizer family, and
                tiny random-weight models of each architecture from
                `pagellm make-model` (path given with --pagellm), and a
                hand-written Qwen3.5 hybrid (qwen35, which make-model cannot write)
tokenizer/      [vocab index byte][flags byte] + text from the tokenizer vectors
chat_template/  the real and built-in chat templates, some with messages after a NUL
server_request/ [endpoint byte] + request bodies of /v1/chat/completions and /v1/completions
responses_request/  request bodies of /v1/responses
anthropic_request/  [count_tokens byte] + request bodies of /v1/messages (and count_tokens)
embeddings_request/ request bodies of /v1/embeddings
llama_request/  [endpoint byte] + bodies of /tokenize, /detokenize, /apply-template, /infill
block_file/     block files of the disk tier that `pagellm generate --cache-dir` writes
                for the shipped model (8-token blocks), and cut or damaged ones

Usage: tests/fuzz/make_seeds.py --pagellm build/pagellm [TARGET...]
(only the named targets' seeds are rewritten when some are named; --pagellm
is needed for gguf)
"""
import argparse
import json
import pathlib
import struct
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CORPUS = ROOT / "tests" / "fuzz" / "corpus"

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gval(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf(kvs, tensors=(), alignment=32, version=3):
    """kvs: [(key, type, value)]; tensors: [(name, dims, dtype, bytes)]."""
    out = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    offset, blobs = 0, []
    for name, dims, dtype, data in tensors:
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", dtype, offset)
        blobs.append(data)
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for b in blobs:
        out += b + b"\0" * (-len(b) % alignment)
    return out


def meta_seeds():
    every = [("u8", U8, 7), ("i8", I8, -7), ("u16", U16, 65535), ("i16", I16, -300),
             ("u32", U32, 1 << 31), ("i32", I32, -1), ("f32", F32, 1.5), ("bool", BOOL, True),
             ("str", STR, "h\u00e9llo \u4f60\u597d"), ("u64", U64, 1 << 63), ("i64", I64, -(1 << 62)),
             ("f64", F64, -2.25), ("arr.i32", ARR, (I32, [1, 2, 3])),
             ("arr.str", ARR, (STR, ["a", "", "\u2581b"])),
             ("arr.nested", ARR, (ARR, [(U8, [1, 2]), (U8, [])])),
             ("general.alignment", U32, 64)]
    f16 = struct.pack("<8e", *[0.5 * i for i in range(8)])
    q8 = struct.pack("<e", 0.1) + bytes(range(32))
    tensors = [("a", [8], 0, struct.pack("<8f", *range(8))), ("b", [8, 1], 1, f16),
               ("c", [32], 8, q8)]
    yield "meta_every_type.gguf", gguf(every, tensors, alignment=64)
    yield "meta_v2_empty.gguf", gguf([], version=2)
    yield "meta_one_tensor.gguf", gguf([("general.architecture", STR, "llama")],
                                       [("token_embd.weight", [8, 4], 0, bytes(128))])


def struct_seeds():
    """Small structural files: a header alone, one key of each value type with
    real key names, short arrays of each element type, tensor infos of
    several types and ranks; each a few hundred bytes."""
    yield "hdr_v3_empty.gguf", gguf([])
    yield "hdr_v1.gguf", struct.pack("<IIII", 0x46554747, 1, 0, 0)
    real = {U8: "tokenizer.ggml.add_bos_token", I8: "general.file_type", U16: "llama.block_count",
            I16: "general.quantization_version", U32: "llama.context_length",
            I32: "tokenizer.ggml.eos_token_id", F32: "llama.attention.layer_norm_rms_epsilon",
            BOOL: "tokenizer.ggml.add_space_prefix", STR: "general.architecture",
            U64: "llama.embedding_length", I64: "llama.feed_forward_length", F64: "llama.rope.freq_base"}
    sample = {U8: 1, I8: -1, U16: 2, I16: -2, U32: 4096, I32: -3, F32: 1e-5, BOOL: False,
              STR: "llama", U64: 1 << 40, I64: -(1 << 40), F64: 1e4}
    for t, key in real.items():
        yield f"kv_type{t:02d}.gguf", gguf([(key, t, sample[t])])
    elems = {U8: [0, 255], I8: [-128, 127], U16: [0, 65535], I16: [-1, 1], U32: [0, 7],
             I32: [1, 1, 2], F32: [0.0, -1.5, 1e30], BOOL: [True, False], STR: ["\u2581a", "<s>", ""],
             U64: [1, 1 << 63], I64: [-1, 0], F64: [0.5, -0.0]}
    for t, items in elems.items():
        yield f"arr_type{t:02d}.gguf", gguf([("tokenizer.ggml.scores" if t in (F32, F64)
                                             else "tokenizer.ggml.tokens" if t == STR
                                             else "tokenizer.ggml.token_type", ARR, (t, items))])
    yield "arr_empty.gguf", gguf([("tokenizer.ggml.merges", ARR, (STR, []))])
    yield "arr_nested.gguf", gguf([("a", ARR, (ARR, [(ARR, [(I32, [1])]), (STR, ["x"])]))])
    # Tensor infos: name, dims, ggml type, data (block sizes: q8_0 34/32, q4_0 18/32,
    # q4_k 144/256, bf16 2/1, i32 4/1, mxfp4 17/32).
    ts = [("t.f32", [4], 0, bytes(16)), ("t.f16", [2, 2], 1, bytes(8)), ("t.q4_0", [32], 2, bytes(18)),
          ("t.q8_0", [32, 1], 8, bytes(34)), ("t.q4_k", [256], 12, bytes(144)),
          ("t.bf16", [1, 1, 2], 30, bytes(4)), ("t.i32", [1, 1, 1, 1], 26, bytes(4)),
          ("t.mxfp4", [32, 2], 39, bytes([121]) + bytes(range(16)) + bytes([130]) + bytes(range(16, 32)))]
    for name, dims, dtype, data in ts:
        yield f"tensor_{name[2:]}.gguf", gguf([], [(name, dims, dtype, data)])
    yield "tensors_all.gguf", gguf([("general.alignment", U32, 16)], ts, alignment=16)
    yield "tensor_zero_dim.gguf", gguf([], [("t", [0, 4], 0, b"")])
    yield "tensor_offset_past_end.gguf", gguf([], [("t", [4], 0, bytes(16))])[:-8]


def tiny_vocab(kind):
    """(key, type, value) lists of very small vocabularies of each family."""
    if kind == "spm":
        toks = ["<unk>", "<s>", "</s>", "<0x0A>", "<0x20>", "<0xC3>", "\u2581", "\u2581a", "\u2581the",
                "h", "e", "l", "o", "he", "llo", "\u2581hello", "<|im_end|>"]
        types = [2, 3, 3, 6, 6, 6] + [1] * 10 + [4]
        return [("general.architecture", STR, "llama"), ("tokenizer.ggml.model", STR, "llama"),
                ("tokenizer.ggml.tokens", ARR, (STR, toks)),
                ("tokenizer.ggml.scores", ARR, (F32, [float(-i) for i in range(len(toks))])),
                ("tokenizer.ggml.token_type", ARR, (I32, types)),
                ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
                ("tokenizer.ggml.unknown_token_id", U32, 0),
                ("tokenizer.ggml.add_bos_token", BOOL, True)]
    if kind == "bpe":
        toks = ["\u0120", "t", "h", "e", "l", "o", "!", "\u0120t", "he", "\u0120the", "ll", "llo",
                "<|endoftext|>"]
        merges = ["\u0120 t", "h e", "\u0120t he", "l l", "ll o"]
        return [("general.architecture", STR, "qwen2"), ("tokenizer.ggml.model", STR, "gpt2"),
                ("tokenizer.ggml.pre", STR, "qwen2"), ("tokenizer.ggml.tokens", ARR, (STR, toks)),
                ("tokenizer.ggml.token_type", ARR, (I32, [1] * (len(toks) - 1) + [3])),
                ("tokenizer.ggml.merges", ARR, (STR, merges)),
                ("tokenizer.ggml.bos_token_id", U32, len(toks) - 1),
                ("tokenizer.ggml.eos_token_id", U32, len(toks) - 1)]
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "e", "h", "l", "o", ".",
            "\u2581the", "\u2581hello", "##s", "##ing"]
    return [("general.architecture", STR, "bert"), ("tokenizer.ggml.model", STR, "bert"),
            ("tokenizer.ggml.tokens", ARR, (STR, toks)),
            ("tokenizer.ggml.token_type", ARR, (I32, [3, 2, 3, 3, 3] + [1] * (len(toks) - 5))),
            ("tokenizer.ggml.unknown_token_id", U32, 1), ("tokenizer.ggml.seperator_token_id", U32, 3),
            ("tokenizer.ggml.cls_token_id", U32, 2)]


def vocab_seeds():
    for kind in ("spm", "bpe", "wpm"):
        yield f"vocab_{kind}.gguf", gguf(tiny_vocab(kind))
    # Byte-level BPE with GPT-2's whole byte alphabet (every text encodes), 4 KB.
    alphabet = [chr(c) for c in range(33, 127)] + [chr(c) for c in range(161, 173)] + \
               [chr(c) for c in range(174, 256)]
    alphabet += [chr(256 + i) for i in range(256 - len(alphabet))]
    toks = alphabet + ["\u0120t", "he", "\u0120the", "<|endoftext|>"]
    kv = [("general.architecture", STR, "gpt2"), ("tokenizer.ggml.model", STR, "gpt2"),
          ("tokenizer.ggml.pre", STR, "gpt-2"), ("tokenizer.ggml.tokens", ARR, (STR, toks)),
          ("tokenizer.ggml.merges", ARR, (STR, ["\u0120 t", "h e", "\u0120t he"])),
          ("tokenizer.ggml.eos_token_id", U32, len(toks) - 1)]
    yield "vocab_bpe_bytes.gguf", gguf(kv)


# Tiny random-weight models of every family (`pagellm make-model` with the
# 17-token SentencePiece vocabulary above), each a few KB (under fuzz.sh's
# -max_len of 8192 for gguf): f16/f32 weights with 8-wide embeddings, and a
# q4_0 one at the smallest row length it allows (32).
MODELS = [  # name, make-model arguments
    ("model_llama_f16.gguf", "--arch llama --n-embd 8 --n-layer 1 --n-head 2 --n-head-kv 1 --n-ff 16 --type f16"),
    ("model_llama_f32_tied.gguf", "--arch llama --n-embd 8 --n-layer 1 --n-head 2 --n-head-kv 2 --n-ff 8 --type f32 --tied"),
    ("model_llama_q4_0.gguf", "--arch llama --n-embd 32 --n-layer 1 --n-head 2 --n-head-kv 1 --n-ff 32 --type q4_0 --tied"),
    ("model_qwen2_f16.gguf", "--arch qwen2 --n-embd 8 --n-layer 1 --n-head 2 --n-head-kv 1 --n-ff 8 --type f16"),
    # q/k norms and head_dim != n_embd / n_head (qwen3), sliding windows, soft
    # caps and post-norms (gemma2, gemma3), fused projections (phi3),
    # whole-projection q/k norms (olmo2).
    ("model_qwen3_f16.gguf", "--arch qwen3 --n-embd 8 --n-layer 1 --n-head 2 --n-head-kv 1 --n-ff 8 --head-dim 8 --type f16"),
    ("model_gemma2_f16.gguf", "--arch gemma2 --n-embd 8 --n-layer 2 --n-head 2 --n-head-kv 1 --n-ff 8 --sliding-window 4 --type f16 --tied"),
    ("model_gemma3_f16.gguf", "--arch gemma3 --n-embd 8 --n-layer 2 --n-head 2 --n-head-kv 1 --n-ff 8 --head-dim 8 --sliding-window 4 --type f16 --tied"),
    ("model_phi3_f16.gguf", "--arch phi3 --n-embd 8 --n-layer 1 --n-head 2 --n-head-kv 2 --n-ff 8 --type f16"),
    ("model_olmo2_f16.gguf", "--arch olmo2 --n-embd 8 --n-layer 1 --n-head 2 --n-head-kv 1 --n-ff 8 --type f16"),
    # Mixtures of experts: 3-D expert stacks, an F32 router.
    ("model_mixtral_f16.gguf", "--arch mixtral --n-embd 8 --n-layer 1 --n-head 2 --n-head-kv 1 --n-ff 8 --n-expert 3 --n-expert-used 2 --type f16"),
    ("model_qwen3moe_f16.gguf", "--arch qwen3moe --n-embd 8 --n-layer 1 --n-head 2 --n-head-kv 1 --n-ff 8 --n-ff-exp 8 --head-dim 8 --n-expert 3 --type f16"),
    # MXFP4 experts (and every other matrix): 17-byte blocks, rows at odd offsets.
    ("model_mixtral_mxfp4.gguf", "--arch mixtral --n-embd 32 --n-layer 1 --n-head 2 --n-head-kv 1 --n-ff 32 --n-expert 2 --n-expert-used 1 --type mxfp4 --tied"),
    # A NoPE layer: smollm3's fourth.
    ("model_smollm3_f16.gguf", "--arch smollm3 --n-embd 8 --n-layer 4 --n-head 2 --n-head-kv 1 --n-ff 8 --type f16"),
]


def model_seeds(pagellm):
    with tempfile.TemporaryDirectory() as tmp:
        vocab = pathlib.Path(tmp) / "vocab.gguf"
        vocab.write_bytes(gguf(tiny_vocab("spm")))
        for name, args in MODELS:
            out = pathlib.Path(tmp) / name
            subprocess.run([pagellm, "make-model", *args.split(), "--vocab-from", str(vocab),
                            "--n-ctx", "64", "--seed", "1", "-o", str(out)],
                           check=True, stdout=subprocess.DEVNULL)
            yield name, out.read_bytes()


def qwen35_seed():
    """A tiny Qwen3.5 hybrid written by hand (make-model cannot write it): the
    keys of ../shared/golden/arch2026's qwen35 file, layer 0 gated delta-net,
    layer 1 gated full attention, tied output; F16 matrices, F32 vectors."""
    E, H, HKV, D, FF = 8, 2, 1, 4, 8            # embd, heads, kv heads, head dim, ffn
    K, S, G, R, INNER = 4, 4, 2, 2, 8           # conv kernel, state, k groups, v heads, inner
    QKV = 2 * G * S + INNER
    a = "qwen35."
    kv = [kv for kv in tiny_vocab("spm") if kv[0] != "general.architecture"]
    n_vocab = len(dict((k, v) for k, _, v in kv)["tokenizer.ggml.tokens"][1])
    kv = [("general.architecture", STR, "qwen35"), (a + "block_count", U32, 2),
          (a + "context_length", U32, 64), (a + "embedding_length", U32, E),
          (a + "feed_forward_length", U32, FF), (a + "attention.head_count", U32, H),
          (a + "attention.head_count_kv", U32, HKV),
          (a + "rope.dimension_sections", ARR, (I32, [1, 1, 0, 0])),
          (a + "rope.freq_base", F32, 1e7), (a + "attention.layer_norm_rms_epsilon", F32, 1e-6),
          (a + "attention.key_length", U32, D), (a + "attention.value_length", U32, D),
          (a + "ssm.conv_kernel", U32, K), (a + "ssm.state_size", U32, S),
          (a + "ssm.group_count", U32, G), (a + "ssm.time_step_rank", U32, R),
          (a + "ssm.inner_size", U32, INNER),
          (a + "attention.recurrent_layers", ARR, (BOOL, [True, False])),
          (a + "full_attention_interval", U32, 2), (a + "rope.dimension_count", U32, 2)] + kv
    state = [12345]

    def values(n):  # a small LCG: deterministic weights in [-0.05, 0.05)
        out = []
        for _ in range(n):
            state[0] = (state[0] * 1103515245 + 12345) % 2**31
            out.append((state[0] / 2**31 - 0.5) / 10)
        return out

    def mat(name, n_in, n_out):
        return (name, [n_in, n_out], 1, struct.pack(f"<{n_in * n_out}e", *values(n_in * n_out)))

    def vec(name, n, mean=0.0):
        return (name, [n], 0, struct.pack(f"<{n}f", *[mean + v for v in values(n)]))

    ffn = lambda l: [vec(f"blk.{l}.post_attention_norm.weight", E, 1.0),
                     mat(f"blk.{l}.ffn_gate.weight", E, FF), mat(f"blk.{l}.ffn_up.weight", E, FF),
                     mat(f"blk.{l}.ffn_down.weight", FF, E)]
    ts = [mat("token_embd.weight", E, n_vocab), vec("output_norm.weight", E, 1.0),
          vec("blk.0.attn_norm.weight", E, 1.0), mat("blk.0.attn_qkv.weight", E, QKV),
          mat("blk.0.attn_gate.weight", E, INNER), vec("blk.0.ssm_conv1d.weight", K * QKV),
          vec("blk.0.ssm_dt.bias", R), vec("blk.0.ssm_a", R, -1.0),
          mat("blk.0.ssm_beta.weight", E, R), mat("blk.0.ssm_alpha.weight", E, R),
          vec("blk.0.ssm_norm.weight", INNER // R, 1.0), mat("blk.0.ssm_out.weight", INNER, E)]
    ts[5] = ("blk.0.ssm_conv1d.weight", [K, QKV], 0, ts[5][3])  # 2-D, kept F32
    ts += ffn(0)
    ts += [vec("blk.1.attn_norm.weight", E, 1.0), mat("blk.1.attn_q.weight", E, 2 * H * D),
           mat("blk.1.attn_k.weight", E, HKV * D), mat("blk.1.attn_v.weight", E, HKV * D),
           vec("blk.1.attn_q_norm.weight", D, 1.0), vec("blk.1.attn_k_norm.weight", D, 1.0),
           mat("blk.1.attn_output.weight", H * D, E)] + ffn(1)
    yield "model_qwen35_f16.gguf", gguf(kv, ts)


def tokenizer_seeds():
    sep = "\n__ggml_vocab_test__\n"
    vocabs = sorted([DATA / "stories260K.gguf"] + list((DATA / "tokenizer-vectors").glob("*.gguf")))
    texts = []
    for inp in sorted((DATA / "tokenizer-vectors").glob("*.inp")):
        for t in inp.read_text(encoding="utf-8").split(sep):
            if t and t not in texts and len(t.encode()) < 400:
                texts.append(t)
    texts = texts[:: max(1, len(texts) // 24)][:24]
    texts += ["<s>hello</s> <|endoftext|>", "\u00e9\u0301 \ufb01 \U0001F600 \xff", "a" * 200]
    for i, t in enumerate(texts):
        yield f"text_{i:02d}", bytes([i % len(vocabs), i % 8]) + t.encode("utf-8")
    yield "invalid_utf8", bytes([3, 7]) + b"\xc3\x28 \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 ok"


def chat_seeds():
    tdir = DATA / "chat-templates"
    msgs = json.dumps({"messages": [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "q1"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"a\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"r\": 2}"},
        {"role": "user", "content": [{"type": "text", "text": "q2"}, {"type": "image"}]}],
        "tools": [{"type": "function", "function": {"name": "get", "description": "d",
                   "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
        "date_string": "1 Jan 2024"})
    for i, p in enumerate(sorted(tdir.glob("*.jinja")) + sorted((tdir / "builtin").glob("*.jinja"))):
        src = p.read_bytes()
        yield p.name, src
        if i % 3 == 0:
            yield p.stem + "_tools.bin", src + b"\0" + msgs.encode()
    yield "syntax_mix.bin", (b"{% macro m(x, y=2) %}{{ x ~ y }}{% endmacro %}{% set ns = namespace(a=0) %}"
                             b"{% for m_ in messages if m_.role != 'tool' %}{{ loop.index }}:{{ m(m_.role) }}"
                             b"{{ m_.content | tojson }}{% set ns.a = ns.a + 1 %}{% endfor %}"
                             b"{{ 'x' * 3 }}{{ [1,2,3] | map('string') | join(',') }}{{ ns.a }}"
                             b"{% if add_generation_prompt %}<|im_start|>assistant{% endif %}")
    yield "raise.bin", b"{{ raise_exception('no') }}\0[]"


def server_seeds():
    chat = {"model": "m", "messages": [{"role": "system", "content": "be brief"},
                                       {"role": "user", "content": "Once upon a time"}]}
    bodies = [
        (0, chat),
        (0, {**chat, "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 8}),
        (0, {**chat, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 42,
             "n": 2, "stop": ["\n", "The"], "repetition_penalty": 1.1, "ignore_eos": True}),
        (0, {**chat, "max_completion_tokens": 16, "logprobs": True, "top_logprobs": 3,
             "presence_penalty": 0, "frequency_penalty": 0, "user": "u"}),
        (0, {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                          {"role": "assistant", "content": None,
                           "tool_calls": [{"type": "function", "function": {"name": "f"}}]},
                          {"role": "developer", "content": "x"}]}),
        (0, {**chat, "response_format": {"type": "text"}}),
        (0, {**chat, "tools": [], "logit_bias": {"1": 5}}),
        (0, {**chat, "tools": [{"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}}}}}],
             "tool_choice": "required", "max_tokens": 8}),
        (0, {"messages": [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": None, "tool_calls": [
                              {"id": "c", "type": "function",
                               "function": {"name": "get_time", "arguments": "{}"}}]},
                          {"role": "tool", "tool_call_id": "c", "content": "noon"}],
             "tools": [{"type": "function", "function": {"name": "get_time"}}],
             "tool_choice": {"type": "function", "function": {"name": "get_time"}}}),
        (0, {**chat, "response_format": {"type": "json_schema", "json_schema": {"schema": {
            "type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}}}}}}),
        (0, {**chat, "grammar": "root ::= [a-z]{1,4}", "max_tokens": 4}),
        (0, {"messages": []}),
        (0, {"messages": [{"role": "user"}], "temperature": None, "stop": None}),
        (1, {"model": "m", "prompt": "Lily wanted", "max_tokens": 12, "echo": False}),
        (1, {"prompt": [1, 403, 407], "stream": True, "logprobs": 2}),
        (1, {"prompt": ["a", "b c"], "n": 3, "best_of": 3, "temperature": 0}),
        (1, {"prompt": [[1, 2], [3]], "stop": "x", "suffix": None}),
        (1, {"prompt": [600, -1]}),
        (1, {"prompt": "x" * 3000}),
        (1, {"prompt": "", "max_tokens": 0}),
        (1, {"prompt": "y", "max_tokens": 1e30, "top_p": 2, "n": 0}),
        (1, {"prompt": "z", "logit_bias": [[1, -100], [2, 100.0]], "temperature": 0}),
        (0, {**chat, "logit_bias": {"0": 1e9, "01": 1, "x": "y", "600": -0.5}}),
        (0, {**chat, "reasoning_format": "deepseek", "chat_template_kwargs": {"enable_thinking": False}}),
        (0, {"messages": [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": "yo", "reasoning_content": "greet"},
                          {"role": "user", "content": "more"}], "reasoning_format": "none"}),
        (0, {**chat, "reasoning_format": "fancy", "chat_template_kwargs": {"messages": []}}),
        (0, {"messages": [{"role": "user", "content": "x", "reasoning_content": 3}],
             "chat_template_kwargs": [1]}),
    ]
    for i, (endpoint, body) in enumerate(bodies):
        yield f"body_{i:02d}.json", bytes([endpoint]) + json.dumps(body).encode()
    yield "not_json", b"\0{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}"
    yield "deep", b"\1" + b"[" * 5000 + b"]" * 5000
    yield "utf8", b"\0" + json.dumps({"messages": [{"role": "user", "content": "\u00e9\ud83d\ude00\u0000"}]},
                                     ensure_ascii=False).encode("utf-8", "surrogatepass")


def responses_seeds():
    tool = {"type": "function", "name": "get_time", "description": "the time",
            "parameters": {"type": "object", "properties": {"zone": {"type": "string",
                                                                     "maxLength": 8}}}}
    bodies = [
        {"model": "m", "input": "Once upon a time"},
        {"input": "Hi", "instructions": "be brief", "max_output_tokens": 8, "temperature": 0.7,
         "top_p": 0.9, "seed": 3, "stream": True, "store": False, "metadata": {"k": "v"}},
        {"input": [{"role": "developer", "content": "sys"},
                   {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "a"},
                                {"type": "input_text", "text": "b"}]},
                   {"role": "assistant", "content": [{"type": "output_text", "text": "c"}]},
                   {"role": "user", "content": "d"}]},
        {"input": "more", "previous_response_id": "resp_known"},
        {"input": "x", "previous_response_id": "resp_unknown"},
        {"input": "what time", "tools": [tool], "tool_choice": "required",
         "parallel_tool_calls": False},
        {"input": "what time", "tools": [tool], "tool_choice": {"type": "function", "name": "get_time"}},
        {"input": [{"role": "user", "content": "t"},
                   {"type": "function_call", "call_id": "call_1", "name": "get_time",
                    "arguments": "{\"zone\": \"UTC\"}"},
                   {"type": "function_call_output", "call_id": "call_1", "output": "noon"}],
         "tools": [tool]},
        {"input": "j", "text": {"format": {"type": "json_schema", "name": "n", "strict": True,
                                           "schema": {"type": "object", "properties": {
                                               "n": {"type": "integer"}}, "required": ["n"]}}}},
        {"input": "j", "text": {"format": {"type": "json_object"}}},
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
        {"input": [{"type": "reasoning", "summary": []}]},
        {"input": "x", "tools": [{"type": "web_search"}]},
        {"input": "x", "max_output_tokens": 0, "background": True},
        {"input": []},
        {},
        {"input": "x" * 3000},
        {"input": [{"role": "user", "content": "Hi"},
                   {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "s"}],
                    "content": [{"type": "reasoning_text", "text": "greet"}]},
                   {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "more"}],
         "grammar": "root ::= [a-z]{1,3}"},
        {"input": [{"type": "reasoning", "content": "x"}]},
    ]
    for i, body in enumerate(bodies):
        yield f"body_{i:02d}.json", json.dumps(body).encode()
    yield "not_json", b"{\"input\": [{\"role\": \"user\""
    yield "utf8", json.dumps({"input": "\u00e9\ud83d\ude00\u0000"},
                             ensure_ascii=False).encode("utf-8", "surrogatepass")


def anthropic_seeds():
    msgs = [{"role": "user", "content": "Once upon a time"}]
    bodies = [
        (0, {"model": "m", "max_tokens": 16, "messages": msgs}),
        (0, {"max_tokens": 8, "system": "be brief", "messages": msgs, "temperature": 0.5,
             "top_p": 0.9, "top_k": 40, "stop_sequences": ["The", "\n"], "stream": True,
             "metadata": {"user_id": "u"}}),
        (0, {"max_tokens": 8, "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
             "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                          {"role": "assistant", "content": "hello"},
                          {"role": "user", "content": "more"}]}),
        (0, {"max_tokens": 8, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]}),
        (0, {"max_tokens": 8, "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]}),
        (0, {"max_tokens": 8, "tools": [{"name": "f", "input_schema": {"type": "object"}}],
             "messages": msgs}),
        (0, {"max_tokens": 8, "thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": msgs}),
        (0, {"max_tokens": 8, "messages": msgs + [{"role": "assistant", "content": "prefill"}]}),
        (0, {"max_tokens": 0, "temperature": 1.5, "messages": msgs}),
        (0, {"messages": msgs}),
        (0, {"max_tokens": 99999999999, "messages": [{"role": "system", "content": "x"}]}),
        (1, {"model": "m", "messages": msgs}),
        (1, {"system": "s", "messages": [{"role": "user", "content": "x" * 3000}]}),
        (0, {"max_tokens": 40, "tools": [{"name": "get_time", "description": "the time", "input_schema": {
            "type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}}}}],
             "tool_choice": {"type": "any", "disable_parallel_tool_use": True}, "messages": msgs}),
        (0, {"max_tokens": 8, "tools": [{"name": "get_time", "input_schema": {"type": "object"}}],
             "tool_choice": {"type": "tool", "name": "get_time"}, "stream": True,
             "messages": [{"role": "user", "content": "t"},
                          {"role": "assistant", "content": [
                              {"type": "thinking", "thinking": "call it", "signature": "s"},
                              {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {}}]},
                          {"role": "user", "content": [
                              {"type": "tool_result", "tool_use_id": "toolu_1",
                               "content": [{"type": "text", "text": "noon"}], "is_error": False},
                              {"type": "text", "text": "and?"}]}]}),
        (1, {"tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "none"},
             "thinking": {"type": "disabled"}, "messages": msgs}),
        (0, {"max_tokens": 8, "tools": [{"type": "web_search_20250305", "name": "w"}],
             "tool_choice": {"type": "maybe"}, "thinking": {"type": "sometimes"}, "messages": msgs}),
    ]
    for i, (count_only, body) in enumerate(bodies):
        yield f"body_{i:02d}.json", bytes([count_only]) + json.dumps(body).encode()
    yield "not_json", b"\0{\"max_tokens\": 5, \"messages\": ["


def llama_seeds():
    """[endpoint byte: 0 tokenize, 1 detokenize, 2 apply-template, 3 infill (+4: StarCoder's vocab)] + body."""
    msgs = [{"role": "user", "content": "Once upon a time"}]
    bodies = [
        (0, {"content": "Once upon a time", "add_special": True, "with_pieces": True}),
        (0, {"content": "<s>\u00e1 x", "parse_special": False}),
        (0, {"content": 5}),
        (1, {"tokens": [1, 415, 2, 511]}),
        (1, {"tokens": [512, -1]}),
        (2, {"messages": msgs}),
        (2, {"messages": msgs, "tools": [{"type": "function", "function": {"name": "f"}}]}),
        (3, {"input_prefix": "def f(", "input_suffix": ")"}),
        (7, {"input_prefix": "def add(a, b):\n    return ", "input_suffix": "\n", "prompt": "a",
             "input_extra": [{"filename": "a.py", "text": "import os\n"}, {"text": "X = 1"}],
             "n_predict": 8, "temperature": 0, "stop": ["\n"], "stream": True}),
        (7, {"input_prefix": "x" * 600, "input_suffix": "y" * 600, "n_predict": -1}),
        (7, {"input_extra": [{"filename": 5}], "repeat_penalty": 0}),
    ]
    for i, (endpoint, body) in enumerate(bodies):
        yield f"body_{i:02d}.json", bytes([endpoint]) + json.dumps(body).encode()
    yield "not_json", b"\x07{\"input_prefix\": "


def embeddings_seeds():
    bodies = [
        {"input": "Once upon a time", "model": "m"},
        {"input": ["Once upon a time", "there was a cat"], "encoding_format": "base64"},
        {"input": [1, 415, 2], "encoding_format": "float", "user": "u"},
        {"input": [[1, 415], [1, 2, 3]]},
        {"input": [[1, 512]]},
        {"input": [-1]},
        {"input": ""},
        {"input": []},
        {"input": [[]]},
        {"input": ["a", 1]},
        {"input": [1.5, 2]},
        {"input": "x", "dimensions": 8},
        {"input": "x", "encoding_format": "hex"},
        {"input": "word " * 600},
        {"input": [1] * 513},
        {"model": "m"},
    ]
    for i, body in enumerate(bodies):
        yield f"body_{i:02d}.json", json.dumps(body).encode()
    yield "not_json", b"{\"input\": ["


def device_map_seeds():
    for i, text in enumerate([
            "0-7:cpu:0", "0-3:cpu:0,4-7:host", "0-7:cpu:1,experts:0-7:host",
            "0-1:cpu:0,2-5:cpu:1,6-7:host,experts:2-3:host", "0-7:host,experts:0:host",
            "0-7:cpu:0,experts:0-3:cpu:0", "experts:0-9:host", "0-3:cpu:0,3-7:cpu:1"]):
        yield f"map_{i}.txt", text.encode()


def grammar_seeds():
    seeds = [
        ("arith.gbnf", b'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= [0-9]+ | "(" expr ")"\x0012+(3-4)'),
        ("json.gbnf", b'root ::= "{" ws (str ":" ws val)? "}"\nval ::= str | [0-9]+\nstr ::= "\\"" [^"\\\\]* "\\""\nws ::= [ \\n]{0,3}\x00{"a": 12}'),
        ("bounds.gbnf", b'root ::= ("ab"{1,3} | [\\u00e0-\\u00ff]+)? "x"{2,}\x00ababxx'),
        ("any.gbnf", b'root ::= .{0,5} "}" # comment\x00\xc3\xa9\xc3\xa9}'),
        # Byte classes the masks set whole (free text, whitespace, digits), unbounded and bounded.
        ("classes.gbnf", b'root ::= [^\\n]* "\\n" [ \\t\\n\\r]* [0-9]{0,3} "\\"" [^"\\\\]{0,4} "\\""\x00a 1~\n \t12"ab"'),
        ("bad_left.gbnf", b"root ::= root \"a\""),
        ("bad_ref.gbnf", b"root ::= missing"),
    ]
    yield from seeds


def json_schema_seeds():
    schemas = [
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": -5, "maximum": 300},
                                          "b": {"type": "string", "pattern": "^[a-z]{2,4}-\\d+$"}},
         "required": ["a"]},
        {"type": "array", "items": {"enum": ["x", 1, None]}, "minItems": 1, "maxItems": 4},
        {"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
         "$ref": "#/$defs/n"},
        {"anyOf": [{"type": "string", "format": "date"}, {"type": ["number", "null"]}]},
        {"type": "object", "additionalProperties": {"type": "boolean"}},
        {"type": "object", "patternProperties": {}},
        {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"},
                                          "t": {"type": "string", "format": "time"}}},
    ]
    for i, s in enumerate(schemas):
        yield f"schema_{i}.json", json.dumps(s).encode()


def tool_call_seeds():
    replies = [
        b"\x00Sure.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
        b"\x00<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}",
        b"\x01{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
        b"\x02[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": \"{}\"}]",
        b"\x02[{\"name\": \"get_time\", \"arguments\": {\"a\": [1, {\"b\": \"]}\"}]}}]",
        # Reply splitters: a thought before a call, and harmony channels (byte 0 also picks the cut).
        b"\x00<think>\nweigh it\n</think>\n\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
        b"\x07<|channel|>analysis<|message|>need time<|end|><|start|>assistant<|channel|>commentary "
        b"to=functions.get_time <|constrain|>json<|message|>{}<|call|>",
    ]
    for i, r in enumerate(replies):
        yield f"reply_{i}.txt", r


def block_file_seeds(pagellm):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([pagellm, "generate", "-m", str(DATA / "stories260K.gguf"), "--block-size", "8",
                        "-p", "Once upon a time, there was a girl", "-n", "2", "--temp", "0",
                        "--cache-dir", d], check=True, capture_output=True, timeout=120)
        files = sorted(pathlib.Path(d).glob("*.kvb"))[:2]
        for i, f in enumerate(files):
            b = f.read_bytes()
            yield f"block_{i}.kvb", b
            yield f"block_{i}_cut.kvb", b[:len(b) // 3]
            flipped = bytearray(b)
            flipped[len(b) // 2] ^= 1
            yield f"block_{i}_flipped.kvb", bytes(flipped)
    yield "magic_only.kvb", b"PGLKVBLK\x01\x00\x00\x00"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pagellm")
    ap.add_argument("targets", nargs="*", help="only these targets (default: all)")
    args = ap.parse_args()
    if (not args.targets or {"gguf", "block_file"} & set(args.targets)) and not args.pagellm:
        ap.error("--pagellm is needed for the gguf and block_file seeds")
    gens = {"gguf": [meta_seeds(), struct_seeds(), vocab_seeds(), model_seeds(args.pagellm),
                     qwen35_seed()],
            "tokenizer": [tokenizer_seeds()], "chat_template": [chat_seeds()],
            "server_request": [server_seeds()], "device_map": [device_map_seeds()],
            "grammar": [grammar_seeds()], "json_schema": [json_schema_seeds()],
            "tool_calls": [tool_call_seeds()], "responses_request": [responses_seeds()],
            "anthropic_request": [anthropic_seeds()], "embeddings_request": [embeddings_seeds()], "llama_request": [llama_seeds()],
            "block_file": [block_file_seeds(args.pagellm)]}
    for target, sources in gens.items():
        if args.targets and target not in args.targets:
            continue
        d = CORPUS / target
        d.mkdir(parents=True, exist_ok=True)
        for old in d.iterdir():
            old.unlink()
        n = size = 0
        for src in sources:
            for name, data in src:
                (d / name).write_bytes(data)
                n += 1
                size += len(data)
        print(f"{target}: {n} seeds, {size} bytes")


if __name__ == "__main__":
    main()
