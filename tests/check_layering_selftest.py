#!/usr/bin/env python3
"""check_layering.py catches what it is meant to: a lower layer including a
higher one, and a concrete backend included from outside the backend layer."""
import pathlib
import subprocess
import sys
import tempfile

CHECK = pathlib.Path(__file__).with_name("check_layering.py")


def violations(files: dict) -> str:
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        r = subprocess.run([sys.executable, str(CHECK), str(root)], capture_output=True, text=True)
        return r.stdout if r.returncode else ""


def main() -> int:
    cases = {
        "kvcache includes a concrete backend": ({"kvcache/a.cpp": '#include "backend/cpu/cpu_backend.h"\n'}, True),
        "planner includes a CUDA header": ({"planner/a.cpp": '#include "backend/cuda/paged_attention.h"\n'}, True),
        "model header includes a concrete backend": ({"model/a.h": '#include "backend/cpu/ops.h"\n'}, True),
        "kvcache includes model": ({"kvcache/a.cpp": '#include "model/runner.h"\n'}, True),
        "jinja includes the tokenizer": ({"jinja/a.cpp": '#include "tokenizer/vocab.h"\n'}, True),
        "the tokenizer includes jinja": ({"tokenizer/a.cpp": '#include "jinja/jinja_template.h"\n'}, False),
        "backend includes its own kernels": ({"backend/a.cpp": '#include "backend/cpu/ops.h"\n'}, False),
        "model uses the interface": ({"model/a.cpp": '#include "backend/backend.h"\n'}, False),
        "the backend factory makes backends": ({"backend/backend_factory.cpp": '#include "backend/cuda/cuda_backend.h"\n'}, False),
        "the model makes none itself": ({"model/backend_factory.cpp": '#include "backend/cuda/cuda_backend.h"\n'}, True),
    }
    failed = 0
    for name, (files, want_bad) in cases.items():
        got = violations(files)
        if bool(got) != want_bad:
            print(f"FAIL {name}: {'no violation' if not got else got.strip()}")
            failed += 1
    print(f"layering self-test: {len(cases) - failed}/{len(cases)} cases as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
