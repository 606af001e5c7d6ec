# conftest: shared fixtures of the Python tests -- the CLI under test, the test data, a seed.
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli_path() -> str:
    """The fp8sim CLI: $FP8SIM_CLI (tests/run.sh: the CMake build's), else the installed one."""
    p = os.environ.get("FP8SIM_CLI") or shutil.which("fp8sim") or os.path.join(
        os.path.dirname(sys.executable), "fp8sim")
    if not os.path.exists(p):
        pytest.skip(f"waived: no fp8sim CLI at {p}")
    return p


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([cli_path(), *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"fp8sim {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


@pytest.fixture
def data_dir() -> str:
    return os.environ.get("FP8SIM_TEST_DATA", os.path.join(ROOT, "tests", "data"))


@pytest.fixture
def rng() -> np.random.Generator:
    seed = int(os.environ.get("FP8SIM_SEED", "1"))
    print(f"seed={seed} (set FP8SIM_SEED to change)")
    return np.random.default_rng(seed)
