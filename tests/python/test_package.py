# test_package: what a newcomer meets first -- the version, the public namespace, a missing
# optional dependency, and errors that say what to do (at construction where they can).
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import fp8sim
from conftest import ROOT, run_cli


def test_version_is_cmakes_and_the_clis():
    cmake = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    want = re.search(r"project\(fp8sim VERSION ([0-9.]+)", cmake).group(1)
    assert fp8sim.__version__ == want
    assert run_cli("--version").stdout.startswith(f"fp8sim {want} (git ")


def test_public_namespace_is_all():
    public = {n for n in dir(fp8sim) if not n.startswith("_")}
    assert public - {"torch"} == set(fp8sim.__all__), sorted(public ^ set(fp8sim.__all__))
    for name in fp8sim.__all__:
        assert hasattr(fp8sim, name), name


@pytest.mark.parametrize("module, code, line", [
    ("torch", "import fp8sim.torch",
     "ModuleNotFoundError: fp8sim.torch needs PyTorch: pip install 'fp8sim[torch]' (or pip install torch)"),
    ("pandas", "import fp8sim; fp8sim.sweep()",
     "ModuleNotFoundError: fp8sim.sweep needs pandas: pip install 'fp8sim[sweep]' (or pip install pandas)"),
    ("pandas", "import fp8sim, numpy as np; fp8sim.analyze(np.ones((1, 32), np.float32), np.ones((1, 32), np.float32))",
     "ModuleNotFoundError: fp8sim.analyze needs pandas: pip install 'fp8sim[sweep]' (or pip install pandas)"),
])
def test_missing_optional_dependency_is_one_line(module, code, line):
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.modules[{module!r}] = None\n{code}"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip().split("\n")[-1] == line, r.stderr


def test_gemm_on_floats_says_quantize_or_encode():
    x = np.ones((2, 32))
    with pytest.raises(ValueError, match=r"^a: float64 values, but gemm takes e4m3 codes \(uint8\): "
                                         r"quantize first .* or encode"):
        fp8sim.gemm(x, np.ones((2, 32), np.uint8))


def test_float8linear_refuses_at_construction():
    ft = pytest.importorskip("fp8sim.torch")
    with pytest.raises(ValueError, match=r"^Float8Linear\(100, 60, recipe=te-tensorwise\): Fprop "
                                         r"\(K = 100\): .*not a multiple of"):
        ft.Float8Linear(100, 60, recipe="te-tensorwise")
    with pytest.raises(ValueError, match=r"Dgrad \(K = 100\)"):
        ft.Float8Linear(64, 100, recipe="fast-accum")
    import torch
    with pytest.raises(ValueError, match=r"Fprop \(K = 100\)"):
        ft.convert(torch.nn.Sequential(torch.nn.Linear(100, 64)), recipe="fast-accum")
    assert ft.Float8Linear(256, 128, recipe="deepseek-v3").recipe.name == "deepseek-v3"

