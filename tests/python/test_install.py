# test_install: the installed module carries the core statically (no shared library beyond the
# C and C++ runtimes), it can be imported before torch, and the installed fp8sim command runs.
import os
import shutil
import subprocess
import sys

import pytest

import fp8sim

RUNTIME = ("linux-vdso", "libc.so", "libm.so", "ld-linux", "libpthread", "libdl", "librt",
           "libstdc++.so", "libgcc_s.so")


def needed(path):
    if shutil.which("ldd") is None:
        pytest.skip("waived: no ldd")
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    return [os.path.basename(line.split()[0]) for line in out.splitlines() if line.strip()]


def test_module_needs_only_the_c_runtime():
    libs = needed(fp8sim._core.__file__)
    extra = [l for l in libs if not l.startswith(RUNTIME)]
    assert not extra, f"{fp8sim._core.__file__} needs {extra}"


def test_installed_cli_runs():
    cli = os.path.join(os.path.dirname(sys.executable), "fp8sim")
    if not os.path.exists(cli):
        pytest.skip(f"waived: {cli} not installed (editable or build-tree run)")
    out = subprocess.run([cli, "encode", "--format", "e4m3", "--", "0.1"], capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["0x1d"]
    assert not [l for l in needed(cli) if "fmt" in l], "the CLI links libfmt"


def test_torch_works_when_imported_after_fp8sim():
    pytest.importorskip("torch")
    code = ("import fp8sim, torch\n"
            "f = torch.compile(lambda x: torch.nn.functional.linear(x, x) + 1, fullgraph=True,"
            " backend='aot_eager')\n"
            "print(f(torch.ones(2, 2)).tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split("\n")[0] == "[[3.0, 3.0], [3.0, 3.0]]", out.stderr[-2000:]
