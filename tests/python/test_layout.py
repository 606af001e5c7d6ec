# test_layout: the library's folders are layers, each including only itself and those below
# it (docs/architecture.md): an include that runs back up fails here with the file, the line
# and the two folders.
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# sim/'s folders, lowest first; cli/ (the command-line tool) sits on top of all of them.
SIM_LAYERS = ["base", "format", "accumulator", "gemm", "scaling", "kernel", "io", "analysis",
              "cli"]
INCLUDE = re.compile(r'^\s*#include "([a-z_]+)/[^"]+"', re.M)


def sources(folder):
    for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
        for f in sorted(files):
            if f.endswith((".hpp", ".cpp", ".cuh", ".cu")):
                yield os.path.join(dirpath, f)


def includes(path):
    text = open(path, encoding="utf-8").read()
    for m in INCLUDE.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)


def test_sim_has_no_loose_sources_and_every_folder_is_a_layer():
    loose = [f for f in os.listdir(os.path.join(ROOT, "sim"))
             if f.endswith((".hpp", ".cpp"))]
    assert loose == [], f"sim/ files outside a concept folder: {loose}"
    folders = {d for d in os.listdir(os.path.join(ROOT, "sim"))
               if os.path.isdir(os.path.join(ROOT, "sim", d)) and d not in ("data", "__pycache__")}
    assert folders == set(SIM_LAYERS), f"sim/ folders {sorted(folders)} vs layers {SIM_LAYERS}"


def test_no_sim_include_runs_back_up():
    wrong = []
    for path in sources("sim"):
        here = os.path.relpath(path, os.path.join(ROOT, "sim")).split(os.sep)[0]
        for line, folder in includes(path):
            if folder in SIM_LAYERS and SIM_LAYERS.index(folder) > SIM_LAYERS.index(here):
                wrong.append(f"{os.path.relpath(path, ROOT)}:{line}: {here}/ includes {folder}/")
    assert not wrong, "\n".join(wrong)


def test_cuda_engine_and_hardware_harness_stay_apart():
    """cuda/engine/ (the emulation engine behind Device::cuda) never includes cuda/hw/ (the
    real-hardware harness), and the library never includes either."""
    wrong = [f"{os.path.relpath(p, ROOT)}:{line}: includes {folder}/"
             for p in sources("cuda/engine") for line, folder in includes(p) if folder == "hw"]
    wrong += [f"{os.path.relpath(p, ROOT)}:{line}: includes {folder}/"
              for p in sources("sim") for line, folder in includes(p)
              if folder in ("engine", "hw")]
    assert not wrong, "\n".join(wrong)
