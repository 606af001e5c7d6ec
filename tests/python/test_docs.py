# test_docs: every documented example that shows output runs, and prints what the page shows.
# Pages: README.md and docs/*.md. An example is
#   - a fenced block whose first line starts with "$ ": shell commands (a command continues
#     over lines ending in "\" or inside an open quote), each followed by its output;
#   - a ```pycon block (">>> " / "... " prompts), run as a doctest;
#   - a ```python block directly followed by a plain ``` block: the code, then what it prints.
# Output is compared line by line after trailing spaces are cut; "..." in the page matches any
# text (doctest's ELLIPSIS), so an excerpt shows only what it keeps. Blocks of one page share
# a folder (files one example writes, the next reads) and Python globals, in page order. An
# HTML comment on the line before a block sets its check:
#   <!-- check: skip: REASON -->   not run (a GPU, an H100 capture, a long run), REASON shown
#   <!-- check: timings -->        numbers followed by s/ms/us are not compared
import contextlib
import doctest
import glob
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
# What an example's folder holds: the repository's folders, linked, and an empty out/.
LINKED = ["tests", "experiments", "cuda", "notebooks", "sim", "python", "build", ".venv"]
TIMING = re.compile(r"\d+(\.\d+)?(e[+-]?\d+)? ?(s|ms|us)\b")


@dataclass
class Block:
    page: str
    line: int          # 1-based line of the opening fence
    kind: str          # console | pycon | python
    text: str
    output: str = ""   # python: the block after it
    options: dict = field(default_factory=dict)

    @property
    def id(self):
        return f"{self.page}:{self.line}"


def parse(page):
    lines = open(os.path.join(ROOT, page), encoding="utf-8").read().split("\n")
    fences = []  # (line index, info, body lines, options)
    i = 0
    while i < len(lines):
        m = re.match(r"^(```+)\s*(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != m.group(1):
            j += 1
        options = {}
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        c = re.match(r"^<!--\s*check:\s*(\w+)(?::\s*(.*?))?\s*-->$", lines[k].strip()) if k >= 0 else None
        if c:
            options[c.group(1)] = c.group(2) or True
        fences.append((i, m.group(2), lines[i + 1:j], options, j))
        i = j + 1
    blocks = []
    for n, (i, info, body, options, end) in enumerate(fences):
        text = "\n".join(body)
        if info == "pycon":
            blocks.append(Block(page, i + 1, "pycon", text, options=options))
        elif info == "python" and n + 1 < len(fences):
            ni, ninfo, nbody, _, _ = fences[n + 1]
            between = lines[end + 1:ni]
            if ninfo in ("", "text") and not any(l.strip() for l in between) and \
                    not (nbody and nbody[0].startswith("$ ")):
                blocks.append(Block(page, i + 1, "python", text, "\n".join(nbody), options))
        elif info in ("", "console", "text") and body and body[0].startswith("$ "):
            blocks.append(Block(page, i + 1, "console", text, options=options))
    return blocks


BLOCKS = [b for p in PAGES for b in parse(p)]


def commands(text):
    """(command, expected output) pairs of a console block."""
    pairs, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        cmd = lines[i][2:]
        i += 1
        while True:
            try:
                complete = not cmd.endswith("\\") and shlex.split(cmd, comments=True) is not None
            except ValueError:  # an open quote: the command goes on
                complete = False
            if complete or i >= len(lines):
                break
            cmd += "\n" + lines[i]
            i += 1
        out = []
        while i < len(lines) and not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
        pairs.append((cmd, "\n".join(out)))
    return pairs


def normal(text, options):
    text = "\n".join(l.rstrip() for l in text.strip("\n").split("\n"))
    return TIMING.sub("<time>", text) if "timings" in options else text


def same(want, got, options):
    want, got = normal(want, options), normal(got, options)
    pattern = "(?s:.*?)".join(re.escape(p) for p in want.split("..."))
    return re.fullmatch(pattern, got) is not None


class Workspace:
    """A page's folder and Python globals, shared by its examples in page order."""

    def __init__(self, tmp):
        self.dir = str(tmp)
        for name in LINKED:
            if os.path.exists(os.path.join(ROOT, name)):
                os.symlink(os.path.join(ROOT, name), os.path.join(self.dir, name))
        os.makedirs(os.path.join(self.dir, "out"))
        self.globals = {"__name__": "__docs__"}
        bindir = os.path.dirname(sys.executable)
        self.env = dict(os.environ, PATH=os.pathsep.join(
            [bindir, os.path.join(ROOT, "build", "sim"), os.environ.get("PATH", "")]),
            MPLBACKEND="Agg", MPLCONFIGDIR=os.path.join(self.dir, ".mpl"))


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory):
    made = {}

    def get(page):
        if page not in made:
            made[page] = Workspace(tmp_path_factory.mktemp(re.sub(r"\W", "_", page)))
        return made[page]
    return get


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_example(block, workspaces, monkeypatch):
    if "skip" in block.options:
        pytest.skip(f"waived: {block.options['skip']}")
    ws = workspaces(block.page)
    monkeypatch.chdir(ws.dir)
    if block.kind == "console":
        for cmd, want in commands(block.text):
            r = subprocess.run(["bash", "-c", cmd], cwd=ws.dir, env=ws.env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
            if not same(want, r.stdout, block.options):
                pytest.fail(f"{block.id}: $ {cmd}\n--- the page shows:\n{want}\n--- it printed "
                            f"(exit {r.returncode}):\n{r.stdout}", pytrace=False)
    elif block.kind == "python":
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block.text, block.id, "exec"), ws.globals)
        if not same(block.output, out.getvalue(), block.options):
            pytest.fail(f"{block.id}: the page shows:\n{block.output}\n--- it printed:\n"
                        f"{out.getvalue()}", pytrace=False)
    else:
        test = doctest.DocTestParser().get_doctest(block.text, ws.globals, block.id, block.page,
                                                   block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS |
                                       doctest.NORMALIZE_WHITESPACE)
        report = io.StringIO()
        runner.run(test, out=report.write, clear_globs=False)
        if runner.failures:
            pytest.fail(report.getvalue(), pytrace=False)


def test_every_page_is_in_the_site():
    """mkdocs.yml's nav names every page of docs/ (and no other)."""
    nav = re.findall(r":\s*(\S+\.md)\s*$", open(os.path.join(ROOT, "mkdocs.yml")).read(), re.M)
    pages = sorted(os.path.relpath(p, os.path.join(ROOT, "docs"))
                   for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    assert sorted(nav) == pages


def test_models_table_is_the_library_s():
    """docs/models.md's preset table is what `fp8sim models --markdown` prints."""
    from conftest import run_cli
    page = open(os.path.join(ROOT, "docs", "models.md"), encoding="utf-8").read()
    start = page.index("<summary>The preset table")
    table = [l for l in page[start:page.index("</details>", start)].split("\n") if l.startswith("|")]
    printed = [l for l in run_cli("models", "--markdown").stdout.split("\n") if l.startswith("|")]
    assert table == printed, "docs/models.md's table differs from `fp8sim models --markdown`"
