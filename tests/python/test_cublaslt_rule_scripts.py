# test_cublaslt_rule_scripts: the scripts behind cuBLASLt's split rule, without a GPU.
# cuda/capture/derive_cublaslt_rule.py re-derives the rule from each recorded table and checks it
# (every recorded point, the traced held-out calls): it must find what the tables' split_rule
# holds and be wrong nowhere. cuda/capture/record_cublaslt_plans.py's options are checked for
# what they record and how they refuse bad input (its recording itself needs the GPU).
import importlib.util
import json
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CAPTURE = os.path.join(ROOT, "cuda", "capture")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(CAPTURE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_derive_finds_the_stored_rule_and_is_wrong_nowhere(gpu, capsys):
    derive = load("derive_cublaslt_rule")
    table = os.path.join(ROOT, "sim", "data", f"cublaslt_plans_{gpu}.json")
    traced = [os.path.join(ROOT, "tests", "data", f"cublaslt_{s}_{gpu}.json")
              for s in ("heldout", "gridcheck")]
    rc = derive.main(["--table", table] + [a for t in traced for a in ("--traced", t)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "WRONG" not in out
    # What it derives now is what the table's split_rule holds (written by --write).
    doc, m, n, k, split, kernel, ws = derive.load_table(table)
    rule = derive.derive(doc, m, n, k, split, ws)
    stored = doc["split_rule"]
    for key, value in rule.items():
        assert stored[key] == value, key
    assert stored["slice_floor_k"] == 2560 and stored["never_split_scales"] == ["row"]
    # The bias groups: the traced evidence less those withdrawn by a counterexample.
    assert f"bias_same_split: {stored['bias_same_split']}" in out
    assert "bf16 tensor" in stored["bias_withdrawn"] and "bf16 tensor" not in stored["bias_same_split"]


def test_derive_on_random_calls_of_every_variant_is_wrong_nowhere(capsys):
    # 34,413 random H100 calls (e4m3 outputs and biases included) that steps 1 and 2 leave.
    derive = load("derive_cublaslt_rule")
    rc = derive.main(["--table", os.path.join(ROOT, "sim", "data", "cublaslt_plans_h100.json"),
                      "--traced", os.path.join(ROOT, "tests", "data", "cublaslt_random_h100.json")])
    out = capsys.readouterr().out
    assert rc == 0 and "WRONG" not in out, out
    assert "'bf16 tensor': '3996 traced calls with a bias, 1 split otherwise'" in out


def test_derive_fill_finds_the_stored_boxes_and_is_wrong_nowhere(capsys):
    # The fill boxes (the rule's step 6), from the H100 table and 77,286 traced calls (both
    # halves of the 11,000 random shapes among them): what --fill-traced derives is what the
    # table stores, every box stops below a counterexample, and the rule with them is wrong
    # nowhere.
    derive = load("derive_cublaslt_rule")
    table = os.path.join(ROOT, "sim", "data", "cublaslt_plans_h100.json")
    traced = [os.path.join(ROOT, "tests", "data", f"cublaslt_{s}_h100.json")
              for s in ("heldout", "gridcheck", "random", "random_odd")]
    rc = derive.main(["--table", table] + [a for t in traced[:2] for a in ("--traced", t)]
                     + [a for t in traced[2:] for a in ("--fill-traced", t)])
    out = capsys.readouterr().out
    assert rc == 0 and "WRONG" not in out, out
    doc, m, n, k, split, kernel, ws = derive.load_table(table)
    r = derive.derive(doc, m, n, k, split, ws)
    fill = derive.derive_fill(derive.fill_points_of(doc, m, n, k, split, traced), r)
    stored = doc["split_rule"]
    for key, value in fill.items():
        assert stored[key] == value, key
    assert len(fill["fill_boxes"]) == len(fill["fill_pinned_by"]) >= 3
    for (s_cap, c_cap), why in zip(fill["fill_boxes"], fill["fill_pinned_by"]):
        mm, nn, kk = (int(x) for x in why.split()[0].split("x"))
        s_max, c = derive.fill_measure(mm, nn, kk, r)
        assert s_max <= s_cap and c > c_cap  # the counterexample lies just outside the box
    # Block scales are not in the boxes (they break them at 14 CTAs), nor is the H200 (no
    # random calls recorded on it to bound boxes with).
    assert all(g.endswith(" tensor") for g in fill["fill_groups"])
    with open(os.path.join(ROOT, "sim", "data", "cublaslt_plans_h200.json")) as f:
        assert "fill_boxes" not in json.load(f)["split_rule"]


def test_derive_refuses_a_missing_table_in_one_line(tmp_path, capsys):
    derive = load("derive_cublaslt_rule")
    assert derive.main(["--table", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none.json" in err[0]


def test_record_options():
    rec = load("record_cublaslt_plans")
    # The default variants are the tables' 15; e4m3 outputs add 5.
    assert len(rec.variants_for(rec.OUTS)) == 15
    assert len(rec.variants_for(rec.ALL_OUTS)) == 20
    assert [v for v in rec.variants_for(("e4m3",)) if v[1] == "block"] == [("e4m3", "block", False)]
    # Traced: by default the two bias variants the tables' bias rule rests on; --bias-dtypes
    # every variant with each.
    assert rec.traced_variants(rec.OUTS, ())[-2:] == [("bf16", "tensor", False, "bf16"),
                                                      ("f16", "row", True, "f16")]
    assert len(rec.traced_variants(rec.OUTS, ("f32", "bf16", "f16"))) == 15 * 4
    # The zone grid: inside the split zone's decode shapes, finer than the LLM grid.
    m, n, k = rec.GRIDS["zone"]
    assert m[:16] == list(range(1, 17)) and min(k) == 5120 and max(n) <= 16384
    assert len(m) * len(n) * len(k) * 15 < 1_500_000  # about 4 minutes on an H100


@pytest.mark.parametrize("args, says", [
    (["--outs", "f32,e5m2"], "e5m2"),
    (["--outs", ""], "none given"),
    (["--bias-dtypes", "bf16,f8"], "f8"),
    (["--grid", "dense"], "dense"),
])
def test_record_refuses_bad_options(args, says, capsys):
    rec = load("record_cublaslt_plans")
    with pytest.raises(SystemExit) as e:
        rec.main(args + ["--table", "x.json"])
    assert e.value.code == 2
    assert says in capsys.readouterr().err


def test_traced_files_name_their_fields():
    # The held-out files the rule is checked on carry what derive and the C++ test read.
    for gpu in ("h100", "h200"):
        with open(os.path.join(ROOT, "tests", "data", f"cublaslt_heldout_{gpu}.json")) as f:
            h = json.load(f)
        for field in ("m", "n", "k", "out", "scale", "fast", "bias", "split_k", "error"):
            assert field in h["fields"]
