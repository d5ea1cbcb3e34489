#!/usr/bin/env python3
"""Fails if a source file includes a header from a higher layer, or a concrete
backend's header (backend/cpu/, backend/cuda/) from outside the backend layer.

Layer order (lower first): util < jinja, grammar < tensor < gguf < backend < kvcache, tokenizer
< model < planner < engine < mpi < server < cli. A folder may include its own layer and lower ones.
Above the backend layer code talks to the Backend interface (backend/*.h);
only the files in CONCRETE_OK, each for the reason given, name a concrete one.
"""
import pathlib
import re
import sys

RANK = {"util": 0, "jinja": 0.5, "grammar": 0.5, "tensor": 1, "gguf": 2, "device": 3, "backend": 3, "kvcache": 4,
        "tokenizer": 4, "model": 5, "planner": 6, "engine": 7, "mpi": 7.5, "server": 8, "cli": 9}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
CONCRETE = re.compile(r'^\s*#\s*include\s+"backend/(cpu|cuda)/')
# Empty: the factory (backend/backend_factory.h) makes backends, repacking
# (Backend::prepare_weights), exp_negated (backend/exp_negated.h) and the
# bandwidth probe (Backend::measure_host_bandwidth) go through the backend layer.
CONCRETE_OK: dict = {}


def main(src: pathlib.Path) -> int:
    bad = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cpp", ".cu", ".cuh"):
            continue
        layer = path.relative_to(src).parts[0]
        if layer not in RANK:
            bad.append(f"{path}: folder '{layer}' has no layer rank")
            continue
        rel = path.relative_to(src).as_posix()
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if layer != "backend" and CONCRETE.match(line) and rel not in CONCRETE_OK:
                bad.append(f"{path}:{n}: {layer} includes a concrete backend "
                           f"(use the Backend interface, or list the file in CONCRETE_OK)")
            m = INCLUDE.match(line)
            if m and m.group(1) in RANK and RANK[m.group(1)] > RANK[layer]:
                bad.append(f"{path}:{n}: {layer} includes higher layer {m.group(1)}")
            # kvcache and tokenizer share a rank but are independent of each other.
            if m and m.group(1) != layer and RANK.get(m.group(1)) == RANK[layer] and layer in (
                    "kvcache", "tokenizer", "jinja", "grammar"):
                bad.append(f"{path}:{n}: {layer} includes sibling layer {m.group(1)}")
    for b in bad:
        print(b)
    print(f"layering: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
