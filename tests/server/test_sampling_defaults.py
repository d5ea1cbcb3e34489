"""serve's sampling defaults (--temp, --top-k, ..., --seed, and the model's
general.sampling.* keys) for requests that leave those fields out, and
llama.cpp's flags on serve (notes for no-ops, aliases landing in the plan)."""
import json
import struct
import subprocess

import requests

from conftest import STORIES

STORY = "Once upon a time, there was a little girl named Lily. She"

# GGUF value types (the GGUF specification).
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
          U64: "<Q", I64: "<q", F64: "<d"}


def _skip_value(buf, pos, vtype):
    if vtype in SCALAR:
        return pos + struct.calcsize(SCALAR[vtype])
    if vtype == STR:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    assert vtype == ARR, vtype
    etype, n = struct.unpack_from("<IQ", buf, pos)
    pos += 12
    for _ in range(n):
        pos = _skip_value(buf, pos, etype)
    return pos


def _string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def with_keys(src, dst, keys):
    """Copies the GGUF file `src` to `dst` with extra metadata: {key: (type, value)}.
    Written from the GGUF specification, independently of pagellm's writer."""
    buf = open(src, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    assert magic == b"GGUF" and version == 3
    pos = 24
    alignment = 32
    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (vtype,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", buf, pos)
        assert key not in keys, key
        pos = _skip_value(buf, pos, vtype)
    kv_end = pos
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", buf, pos)
        pos += 8 + n
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        pos += 4 + 8 * n_dims + 4 + 8
    infos_end = pos
    data_start = (infos_end + alignment - 1) // alignment * alignment
    extra = b""
    for key, (vtype, value) in keys.items():
        extra += _string(key) + struct.pack("<I", vtype)
        extra += _string(value) if vtype == STR else struct.pack(SCALAR[vtype], value)
    head = (struct.pack("<4sIQQ", magic, version, n_tensors, n_kv + len(keys)) + buf[24:kv_end]
            + extra + buf[kv_end:infos_end])
    head += b"\0" * (-len(head) % alignment)  # tensor offsets count from the data's start
    with open(dst, "wb") as f:
        f.write(head + buf[data_start:])
    return dst


def complete(srv, seed, **extra):
    body = {"prompt": STORY, "max_tokens": 24, "seed": seed, **extra}
    r = requests.post(srv.url + "/v1/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def test_the_key_writer_makes_files_pagellm_reads(pagellm_bin, tmp_path):
    path = with_keys(STORIES, tmp_path / "keys.gguf",
                     {"general.sampling.temp": (F32, 0.25), "general.sampling.top_k": (I32, 20)})
    out = subprocess.run([pagellm_bin, "inspect", "--json", str(path)], check=True,
                         capture_output=True, text=True, timeout=60)
    meta = json.loads(out.stdout)["metadata"]
    assert meta["general.sampling.temp"] == 0.25
    assert meta["general.sampling.top_k"] == 20
    # The tensors still load: the same greedy text as the original file.
    gen = [subprocess.run([pagellm_bin, "generate", "-m", str(m), "-p", STORY, "-n", "12", "--temp",
                           "0", "--json"], check=True, capture_output=True, text=True, timeout=60)
           for m in (STORIES, path)]
    assert json.loads(gen[0].stdout)["output_ids"] == json.loads(gen[1].stdout)["output_ids"]


def test_serve_temp_is_the_default_and_a_request_still_wins(start_server):
    srv = start_server("--temp", "0")
    assert "sampling defaults: temp 0 (--temp), top_k 0 (default), top_p 1 (default)" in \
        srv.wait_output("ready:")
    # No temperature: greedy, whatever the seed, and the same as an explicit 0.
    greedy = complete(srv, 1)
    assert complete(srv, 2) == greedy
    assert complete(srv, 3, temperature=0) == greedy
    # An explicit temperature wins: different seeds, different samples.
    hot = {complete(srv, s, temperature=1.5) for s in (1, 2, 3)}
    assert len(hot) > 1, hot
    # The other APIs go through the same defaults.
    chat = [requests.post(srv.url + "/v1/chat/completions", timeout=60,
                          json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16,
                                "seed": s}).json()["choices"][0]["message"]["content"]
            for s in (1, 2)]
    assert chat[0] == chat[1]
    resp = [requests.post(srv.url + "/v1/responses", timeout=60,
                          json={"input": "Hi", "max_output_tokens": 16, "seed": s}).json()
            for s in (1, 2)]
    assert resp[0]["output"][0]["content"][0]["text"] == resp[1]["output"][0]["content"][0]["text"]
    assert resp[0]["temperature"] == 0  # echoes the value used
    msgs = [requests.post(srv.url + "/v1/messages", timeout=60,
                          json={"messages": [{"role": "user", "content": "Hi"}],
                                "max_tokens": 16}).json()["content"][0]["text"] for _ in range(2)]
    assert msgs[0] == msgs[1]


def test_without_flags_requests_sample_with_openai_defaults(start_server):
    srv = start_server()
    assert "sampling defaults: temp 1 (default)" in srv.wait_output("ready:")
    assert len({complete(srv, s) for s in (1, 2, 3)}) > 1


def test_serve_seed_is_the_default_seed(start_server):
    srv = start_server("--seed", "5", "--top-k", "0")
    assert "seed 5 (--seed)" in srv.wait_output("ready:")
    def unseeded():
        r = requests.post(srv.url + "/v1/completions", timeout=60,
                          json={"prompt": STORY, "max_tokens": 24})
        return r.json()["choices"][0]["text"]
    assert unseeded() == unseeded() == complete(srv, 5)


def test_model_keys_are_defaults_and_flags_beat_them(start_server, tmp_path):
    model = with_keys(STORIES, tmp_path / "greedy.gguf",
                      {"general.sampling.temp": (F32, 0.0), "general.sampling.top_k": (I32, 20)})
    srv = start_server(model=model)
    line = srv.wait_output("ready:")
    assert "temp 0 (model), top_k 20 (model), top_p 1 (default)" in line, line
    assert complete(srv, 1) == complete(srv, 2)
    flagged = start_server("--temp", "1.5", model=model)
    line = flagged.wait_output("ready:")
    assert "temp 1.5 (--temp), top_k 20 (model)" in line, line
    assert len({complete(flagged, s) for s in (1, 2, 3)}) > 1


def test_generate_uses_the_models_keys_under_its_flags(pagellm_bin, tmp_path):
    model = with_keys(STORIES, tmp_path / "greedy.gguf", {"general.sampling.temp": (F32, 0.0)})

    def gen(*args):
        r = subprocess.run([pagellm_bin, "generate", "-m", str(model), "-p", STORY, "-n", "16",
                            "--json", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["output_ids"], r.stderr

    a, err = gen("--seed", "1")
    b, _ = gen("--seed", "2")
    assert a == b
    assert "sampling: temp 0 (model), top_k 40 (default)" in err, err
    hot = {tuple(gen("--seed", str(s), "--temp", "1.5")[0]) for s in (1, 2, 3)}
    assert len(hot) > 1


def test_bad_model_keys_are_ignored_with_a_warning(start_server, tmp_path):
    model = with_keys(STORIES, tmp_path / "bad.gguf", {"general.sampling.top_p": (F32, 7.0)})
    srv = start_server(model=model)
    assert "top_p 1 (default)" in srv.wait_output("ready:")
    assert "general.sampling.top_p = 7 is out of range" in srv.wait_output("warning:")


def test_llama_cpp_flags_on_serve(start_server):
    srv = start_server("-ngl", "99", "-fa", "on", "--jinja", "--parallel", "3", "-b", "512",
                       "-ub", "256", "-c", "1024", "--mlock", "--no-mmap")
    srv.wait_output("ready:")
    notes = [l for l in srv.stderr_lines if l.startswith("note: ")]
    assert len(notes) == 4, notes  # -ngl, -fa, --jinja, -ub: once each
    plan = requests.get(srv.url + "/v1/plan", timeout=10).json()
    assert plan["max_num_seqs"] == 3
    assert plan["server"]["max_batched_tokens"] == 512
    assert plan["kv_tokens"] == 1024
    assert complete(srv, 1)


def test_serve_rejects_bad_sampling_flags(pagellm_bin):
    for args in (["--temp", "-1"], ["--top-p", "2"], ["--top-k", "-3"], ["--repeat-penalty", "0"]):
        r = subprocess.run([pagellm_bin, "serve", *args], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 1, args
        assert r.stderr.startswith("error: --"), r.stderr
        assert r.stderr.count("\n") == 1, r.stderr


def test_no_jinja_uses_the_built_in_template_of_the_family(start_server, tmp_path):
    own = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\nCUSTOM PREAMBLE {{ m['content'] }}"
           "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    model = with_keys(STORIES, tmp_path / "tmpl.gguf", {"tokenizer.chat_template": (STR, own)})

    def prompt_tokens(srv):
        r = requests.post(srv.url + "/v1/chat/completions", timeout=60,
                          json={"messages": [{"role": "user", "content": "Hello"}],
                                "max_tokens": 1})
        assert r.status_code == 200, r.text
        return r.json()["usage"]["prompt_tokens"]

    mine = start_server(model=model)
    assert "chat template from the model," in mine.wait_output("ready:")
    builtin = start_server("--chat-template", "chatml", model=model)
    plain = start_server("--no-jinja", model=model)
    assert "chatml (chosen on the command line)" in plain.wait_output("ready:")
    assert "--no-jinja: using the built-in 'chatml' template (the model's family)" in \
        plain.wait_output("note:")
    assert prompt_tokens(plain) == prompt_tokens(builtin) < prompt_tokens(mine)
