# test_stage_table: README.md's table of the test command's stages lists exactly the stages
# that tests/run.sh and tests/setup.sh time (their `took "<stage> (<detail>)"` lines, printed
# as "run: <stage> ... took N s" and "setup: <stage> ... took N s"), in their order, so that a
# new stage cannot go missing from the table (nor a removed one linger there).
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOK = re.compile(r'\btook "([^"$]+?)(?: \([^"]*)?"')
# The table: its header's first cell is "stage", its rows' first cells `run: X` / `setup: X`.
HEADER = re.compile(r"^\| stage \|")
ROW = re.compile(r"^\| `(run|setup): ([^`]+)` \|")


def timed_stages(script, prefix):
    """The stage names a script passes to took(), in order; every took call must be literal."""
    text = open(os.path.join(ROOT, "tests", script), encoding="utf-8").read()
    calls = [l for l in text.splitlines() if re.search(r"^\s*took \"", l) or " took \"" in l]
    names = TOOK.findall(text)
    assert len(names) == len(calls), (
        f"tests/{script}: a took call whose stage name is not a literal string: "
        f"{[c.strip() for c in calls]}")
    return [(prefix, n) for n in names]


def readme_stages():
    lines = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines()
    start = [i for i, l in enumerate(lines) if HEADER.match(l)]
    assert len(start) == 1, "README.md: expected one table whose header starts '| stage |'"
    rows = []
    for l in lines[start[0] + 2:]:
        if not l.startswith("|"):
            break
        m = ROW.match(l)
        assert m, f"README.md: stage row not of the form | `run: X` | ...: {l}"
        rows.append((m.group(1), m.group(2)))
    return rows


def test_readme_stage_table_matches_the_scripts():
    setup = timed_stages("setup.sh", "setup")
    run = timed_stages("run.sh", "run")
    assert ("run", "setup") in run, "tests/run.sh no longer times its set-up"
    # run.sh's own "setup" stage is the whole of setup.sh: its parts come first in the table.
    want = setup + [s for s in run]
    got = readme_stages()
    missing = [f"{p}: {n}" for p, n in want if (p, n) not in got]
    extra = [f"{p}: {n}" for p, n in got if (p, n) not in want]
    assert not missing and not extra, (
        f"README.md's stage table: missing {missing}, not a stage of the scripts {extra}")
    assert got == want, f"README.md's stage table is not in the scripts' order: {got} vs {want}"


def test_took_pattern_reads_names_and_drops_details():
    # The parser itself, on the shapes the scripts use.
    text = ('took "setup (install and build)"\n  took "ctest"\n'
            'took "fuzzing (${#targets[@]} targets x $seconds s)"\n')
    assert TOOK.findall(text) == ["setup", "ctest", "fuzzing"]
