"""Pipeline stages over MPI (mpirun --oversubscribe on this one machine):
generate and serve with 2 and 3 ranks give one process's tokens (batched,
with preemption), a killed rank ends the stream with an error event and the
job exits non-zero, and a rank with another model file is refused by name.
Skipped, with the reason, when mpirun is missing or the build has no MPI."""
import json
import os
import shutil
import signal
import stat
import subprocess
import threading
import time

import pytest

from conftest import DATA, STORIES, Server

MPIRUN = shutil.which("mpirun")
Q8 = DATA / "golden/random/rand-llama-tok512-Q8_0.gguf"
PROMPTS = ["Once upon a time", "Lily wanted", "The little cat was sad because",
           "One day, Tom and his dog went to the park.", "Ben had 3 red cars",
           "The sun was hot and", "Sam and Sue", "In the big forest there"]


@pytest.fixture(scope="module")
def mpi(pagellm_bin):
    if not MPIRUN:
        pytest.skip("mpirun is not installed (scripts/setup.sh installs openmpi-bin)")
    version = subprocess.run([pagellm_bin, "--version"], capture_output=True, text=True).stdout
    if "MPI on" not in version:
        pytest.skip(f"this build has no MPI ({version.strip()})")
    return pagellm_bin


@pytest.fixture(autouse=True)
def open_mpi_leaks_suppressed(monkeypatch):
    """Under the sanitizer build, LeakSanitizer reports what Open MPI keeps past
    MPI_Finalize; the suppressions name its libraries, which only a full stack
    unwind (not the fast one, which stops in frame-pointer-less code) reaches."""
    if "ASAN_OPTIONS" in os.environ:
        monkeypatch.setenv("ASAN_OPTIONS", os.environ["ASAN_OPTIONS"] + ":fast_unwind_on_malloc=0")
        supp = os.path.join(os.path.dirname(__file__), "lsan-openmpi.supp")
        lsan = os.environ.get("LSAN_OPTIONS", "")
        monkeypatch.setenv("LSAN_OPTIONS", (lsan + ":" if lsan else "") + f"suppressions={supp}")


def mpirun(n, *args):
    return [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(n), *args]


@pytest.fixture
def launcher(mpi, tmp_path):
    """A script that runs pagellm under mpirun with N ranks (Server takes a binary)."""
    def make(n, env_extra=""):
        path = tmp_path / f"mpi{n}.sh"
        path.write_text("#!/bin/sh\n" + env_extra +
                        f"exec {' '.join(mpirun(n, '-x', 'PAGELLM_PIPELINE_TIMEOUT_S', mpi))} \"$@\"\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
        return str(path)
    return make


def generate(cmd, model):
    out = subprocess.run([*cmd, "generate", "-m", str(model), "-p", "Once upon a time", "-n", "40",
                          "--temp", "0", "--ignore-eos", "--json", "-t", "1"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["output_ids"]


@pytest.mark.parametrize("model", [STORIES, Q8], ids=["stories260K", "rand-q8_0"])
def test_generate_on_two_and_three_ranks_equals_one_process(mpi, model):
    want = generate([mpi], model)
    for n in (2, 3):
        assert generate(mpirun(n, mpi), model) == want, f"{n} ranks"


def test_a_hybrid_model_on_two_and_three_ranks_equals_one_process(mpi, tmp_path):
    """qwen35: each rank keeps its recurrent layers' state; the step carries the
    sequences' slots, and two requests decode together (a long prompt cut in
    64-token chunks, and n = 2 forked samples)."""
    model = tmp_path / "qwen35.gguf"
    subprocess.run([mpi, "make-model", "--arch", "qwen35", "--n-embd", "64", "--n-layer", "6",
                    "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--n-ctx", "1024",
                    "--full-attention-interval", "3", "--ssm-state-size", "16",
                    "--ssm-group-count", "2", "--ssm-v-heads", "4", "--type", "f32",
                    "--vocab-from", str(STORIES), "--seed", "4", "-o", str(model)],
                   check=True, capture_output=True, timeout=120)
    want = generate([mpi], model)
    for n in (2, 3):
        assert generate(mpirun(n, mpi), model) == want, f"{n} ranks"


def replies(server, client_for):
    """Greedy replies to every prompt, 8 streams at once."""
    out = [None] * len(PROMPTS)

    def run(i):
        text = ""
        for chunk in client_for(server).completions.create(model="m", prompt=PROMPTS[i],
                                                           max_tokens=100, temperature=0,
                                                           stream=True):
            text += "".join(c.text for c in chunk.choices)
        out[i] = text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    return out


def test_serve_on_two_and_three_ranks_equals_one_process(mpi, launcher, client_for):
    # A cache of 160 tokens for 8 streams of up to ~120: two that overlap do not fit
    # together (preemption and recompute).
    flags = ["-m", str(STORIES), "-c", "160", "--max-num-seqs", "8", "-t", "1"]
    one = Server(mpi, flags)
    try:
        want = replies(one, client_for)
    finally:
        one.stop()
    # Whole steps, then steps cut into a part per rank (the ranks work on
    # different parts at once): the same tokens either way.
    for n, parts in ((2, 1), (3, 1), (2, 2), (3, 3)):
        s = Server(launcher(n, f"export PAGELLM_PIPELINE_MICRO_BATCHES={parts}\n"), flags)
        try:
            assert replies(s, client_for) == want, f"{n} ranks, {parts} parts"
            if parts > 1:
                assert f"steps in up to {parts} parts" in s.output(), s.output()
            assert s.metrics()["pagellm_preemptions_total"] > 0
            # Blocks are freed just after a stream's last event: wait for it.
            s.wait_metric("pagellm_kv_blocks_used", lambda v: v == 0)
        finally:
            # mpirun turns a SIGTERM into the job's end (exit status 1 whatever the ranks
            # did): rank 0's own clean shutdown is what shows.
            s.stop()
            assert "pagellm serve: stopped" in s.output(), s.output()


def rank_pids(mpirun_pid, rank):
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env and b"serve" in cmd:
            pids.append(int(pid))
    return pids


@pytest.mark.parametrize("phase", ["decode", "long_prefill"])
def test_a_killed_rank_ends_the_stream_with_an_error_and_the_job_exits_non_zero(
        launcher, slow_model, phase):
    # long_prefill: rank 0 is inside a step of 3,202 prompt tokens on its own layers when
    # mpirun's teardown signal comes (SIGKILL follows about a second later), so the error
    # event cannot wait for that step to end.
    import requests
    decode = phase == "decode"
    s = Server(launcher(2), ["-m", str(slow_model), "-t", "1", "--max-batched-tokens", "4096"])
    try:
        r = requests.post(s.url + "/v1/completions", stream=True, timeout=60,
                          json={"prompt": "Once upon a time" + ("" if decode else " Once upon a time" * 799),
                                "max_tokens": 3000 if decode else 300, "temperature": 0,
                                "stream": True, "ignore_eos": True})
        lines = r.iter_lines()
        if decode:
            for _ in range(5):  # the stream is running
                next(lines)
        else:
            time.sleep(0.1)  # the prefill is running
        victims = rank_pids(s.proc.pid, 1)
        assert victims, "rank 1 not found"
        t0 = time.monotonic()
        os.kill(victims[0], signal.SIGKILL)
        try:
            events = [json.loads(l[6:]) for l in lines if l.startswith(b"data: {")]
        except requests.exceptions.ChunkedEncodingError as e:
            s.proc.wait(60)
            pytest.fail(f"the stream ended without its error event ({e}): {s.output()}")
        assert any("error" in e for e in events), (events[-3:], s.output())
        assert time.monotonic() - t0 < 30
        code = s.proc.wait(60)
        assert code != 0
        assert "pipeline" in s.output() or "MPI job is being stopped" in s.output(), s.output()
    finally:
        s.stop()


def test_a_rank_with_another_model_file_is_refused_by_name(mpi, tmp_path):
    # Rank 1 reads a different file under the same path (a per-rank copy).
    other = tmp_path / "model.gguf"
    script = tmp_path / "pick.sh"
    script.write_text("#!/bin/sh\n"
                      f"if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then m={Q8}; else m={STORIES}; fi\n"
                      f"exec {mpi} generate -m \"$m\" -p hi -n 4 -t 1\n")
    script.chmod(0o755)
    out = subprocess.run(mpirun(2, str(script)), capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "rank 1" in out.stderr and "model file" in out.stderr, out.stderr


def plan_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return out.returncode, (json.loads(out.stdout) if out.stdout.strip() else None), out.stderr


def test_plan_over_two_and_three_nodes(mpi):
    for n in (2, 3):
        code, j, err = plan_json(mpirun(n, mpi, "plan", "-m", str(Q8), "--json"))
        assert code == 0, err
        assert j["nodes"] == n
        nodes = [d["node"] for d in j["devices"]]
        assert nodes == list(range(n))
        # Contiguous stages over every layer, each node at least one.
        assert j["devices"][0]["first_layer"] == 0
        for a, b in zip(j["devices"], j["devices"][1:]):
            assert b["first_layer"] == a["last_layer"] + 1
        assert j["devices"][-1]["last_layer"] == j["model"]["n_layer"] - 1
        assert j["devices"][-1]["holds_output"]


def test_plan_with_per_node_caps_stays_within_every_budget(mpi, tmp_path):
    # Rank 0 may plan with 3 MiB, rank 1 with 24 MiB: the big node takes more layers, and the
    # cache grows until the small one is full.
    script = tmp_path / "capped.sh"
    script.write_text("#!/bin/sh\n"
                      "if [ \"$OMPI_COMM_WORLD_RANK\" = 0 ]; then export PAGELLM_NODE_MEMORY=3MiB; "
                      "else export PAGELLM_NODE_MEMORY=24MiB; fi\n"
                      f"exec {mpi} \"$@\"\n")
    script.chmod(0o755)
    code, j, err = plan_json(mpirun(2, str(script), "plan", "-m", str(Q8), "--json",
                                    "--max-batched-tokens", "64", "--max-seq-len", "256"))
    assert code == 0, err
    for d in j["devices"]:
        used = d["weight_bytes"] + d["kv_bytes"] + d["workspace_bytes"]
        assert used <= d["free_bytes"] - d["headroom_bytes"], d
    small, big = j["devices"]
    assert small["last_layer"] - small["first_layer"] < big["last_layer"] - big["first_layer"]
    assert j["binding_device"] == "node0:host"
    # Asking for more cache than the small node holds is refused, saying what fits.
    code, j, err = plan_json(mpirun(2, str(script), "plan", "-m", str(Q8), "--json",
                                    "--max-batched-tokens", "64", "-c", "10000000"))
    assert code == 2
    assert "at most" in err, err


def test_devices_per_rank(mpi):
    # --device applies to every rank: each places what fits of its stage on its own cpu:0
    # (a 3 MiB virtual device) and the rest on its host; the tokens are one process's.
    flags = ["--device", "cpu:0=3MiB", "--max-batched-tokens", "64", "--max-seq-len", "256"]
    code, j, err = plan_json(mpirun(2, mpi, "plan", "-m", str(Q8), "--json", *flags))
    assert code == 0, err
    by_node = {}
    for d in j["devices"]:
        by_node.setdefault(d["node"], []).append(d)
        used = d["weight_bytes"] + d["kv_bytes"] + d["workspace_bytes"]
        assert used <= d["free_bytes"] - d["headroom_bytes"], d
    assert sorted(by_node) == [0, 1]
    for node, devs in by_node.items():
        assert any(d["name"] == "cpu:0" and d["first_layer"] >= 0 for d in devs), (node, devs)
    want = generate([mpi], Q8)
    out = subprocess.run(mpirun(2, mpi, "generate", "-m", str(Q8), "-p", "Once upon a time", "-n", "40",
                                "--temp", "0", "--ignore-eos", "--json", "-t", "1", *flags),
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["output_ids"] == want
