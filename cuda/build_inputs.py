#!/usr/bin/env python3
"""build_inputs: every file the build's compilations read, from the compilers themselves.

Reads a configured build tree's compile_commands.json (CMake writes it: the build's own list of
translation units and their flags), runs each compilation again as a dependency listing (the
same command with -M instead of -c/-o, for g++, clang++ and nvcc alike) and prints the union
of the files the compilers opened, one absolute path a line, sorted. cuda/stage_deps.sh stages
the Debian-package headers among them; tests/test_stage_deps.sh checks a staged prefix with
the dependency lists of real compilations.

Usage: build_inputs.py <build dir> [--jobs N]
Exit 2 with one line when the build tree has no compile_commands.json or a listing fails.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# Flags that name an output (dropped with their argument) or ask for a compilation/depfile.
WITH_ARG = {"-o", "-MT", "-MF", "-MQ"}
ALONE = {"-c", "-MD", "-MMD"}


def listing_command(entry):
    """The entry's compilation as a dependency listing on stdout (no object, no depfile)."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in WITH_ARG:
            skip = True
        elif a not in ALONE:
            out.append(a)
    return out + ["-M"]


def parse_depfile(text):
    """The prerequisites of a make rule (the compilers' -M output), normalised paths."""
    words = text.replace("\\\n", " ").split()
    # The target(s) come first, up to the word ending in ':'.
    for i, w in enumerate(words):
        if w.endswith(":"):
            words = words[i + 1:]
            break
    return words


def run(entry):
    cmd = listing_command(entry)
    r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
    if r.returncode != 0:
        err = (r.stderr.strip().splitlines() or ["(no message)"])[0]
        raise RuntimeError(f"{entry['file']}: dependency listing failed: {err}")
    return [os.path.normpath(os.path.join(entry["directory"], p)) for p in parse_depfile(r.stdout)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build_dir")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    db = os.path.join(args.build_dir, "compile_commands.json")
    if not os.path.isfile(db):
        print(f"build_inputs: error: {db} not found (configure the build with CMake first)",
              file=sys.stderr)
        return 2
    with open(db) as f:
        entries = json.load(f)
    files = set()
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for deps in pool.map(run, entries):
                files.update(deps)
    except RuntimeError as e:
        print(f"build_inputs: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.write("".join(p + "\n" for p in sorted(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
