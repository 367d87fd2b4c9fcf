"""hints.yaml validated against its schema and its spec (issue 29 item 3), and the special-values advice reaching a
student (issue 29 items 3, 7, 10): a key the grader never looks up is text no student sees, so every problem's
hints.yaml must name only real reasons, finding codes, pattern codes, perf keys, and the distributions and dtypes
its own cases use; a wrong one fails the problem's load (a SpecError naming the file, the key and the choices)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from grader.problem import hints
from grader.problem.spec import SpecError, load_problem
from grader.report.student import write_student_report

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "reference").glob("*/spec.yaml"))


def copy_problem(tmp_path: Path, name: str = "glu") -> Path:
    dst = tmp_path / name
    shutil.copytree(ROOT / "reference" / name, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def with_hints(tmp_path: Path, edit) -> Path:
    """A copy of glu's problem folder whose hints.yaml is glu's, changed by edit(raw dict)."""
    dst = copy_problem(tmp_path)
    raw = yaml.safe_load((dst / "hints.yaml").read_text())
    edit(raw)
    (dst / "hints.yaml").write_text(yaml.safe_dump(raw))
    return dst / "spec.yaml"


@pytest.mark.parametrize("spec", SPECS, ids=[p.parent.name for p in SPECS])
def test_every_problem_hints_fit_their_spec(spec):
    p = load_problem(spec)  # validates hints.yaml (raises SpecError on any fault)
    h = hints.load_file(spec.parent / "hints.yaml")
    dists = {c.dist for c in p.cases}
    assert set(h.get("dist", {})) <= dists, "a dist hint no case of the spec uses"
    # The special-values advice exists for every problem with a special-values case: under the spec's own name.
    if "special" in dists:
        assert hints.text(h, "dist", "special"), f"{spec.parent.name}: no words for its special-values cases"
    # formula keys: the operands, or a mistake the reference really returns.
    ref = importlib.util.spec_from_file_location(f"ref_{p.name}", p.reference)
    assert ref and ref.loader
    mod = importlib.util.module_from_spec(ref)
    ref.loader.exec_module(mod)
    named = set(mod.mistakes(torch.randn(2, 8))) if hasattr(mod, "mistakes") else set()
    assert set(h.get("formula", {})) <= set(hints.FORMULA_OPERANDS) | named


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        (lambda r: r["dist"].update(inf_nan=r["dist"].pop("special")), ["dist.inf_nan", "special"]),
        (lambda r: r["reason"].update({"wrong value": "x"}), ["reason.wrong value", "wrong values"]),
        (lambda r: r["finding"].update({"torch_compute": "x"}), ["finding.torch_compute", "torch-compute"]),
        (lambda r: r["pattern"].update({"overflow": "x"}), ["pattern.overflow", "hint-overflow"]),
        (lambda r: r["perf"].update({"vectorize": "x"}), ["perf.vectorize", "roofline"]),
        (lambda r: r["dtype"].update({"float64": "x"}), ["dtype.float64", "bfloat16"]),
        (lambda r: r.update(hint={"a": "b"}), ["unknown key 'hint'", "later_rows"]),
        (lambda r: r["reason"].update({"wrong values": 3}), ["reason.wrong values", "text"]),
    ],
    ids=["dist", "reason", "finding", "pattern", "perf", "dtype", "section", "not-text"],
)
def test_a_wrong_key_fails_the_problem_load(tmp_path, edit, needles):
    spec = with_hints(tmp_path, edit)
    with pytest.raises(SpecError) as e:
        load_problem(spec)
    msg = str(e.value)
    assert "hints.yaml" in msg and "\n" not in msg, msg
    for n in needles:
        assert n in msg, msg


def test_a_dist_no_case_uses_is_refused(tmp_path):
    """'saturating' is a real distribution, but not one a case of this spec uses once its cases are gone."""
    dst = copy_problem(tmp_path)
    spec = yaml.safe_load((dst / "spec.yaml").read_text())
    spec["correctness"]["cases"] = [c for c in spec["correctness"]["cases"] if c.get("dist") != "saturating"]
    (dst / "spec.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError, match=r"dist\.saturating.*no case"):
        load_problem(dst / "spec.yaml")


def test_no_hints_file_is_fine(tmp_path):
    dst = copy_problem(tmp_path)
    (dst / "hints.yaml").unlink()
    assert load_problem(dst / "spec.yaml").name == "glu"


def test_overflowing_sigmoid_gets_the_special_values_advice_once(grade_dir, tmp_path):
    """End to end on the CPU: an exp-overflow kernel graded on the inf/NaN cases; the report says the problem's
    special-values words (dist: special), each hint once with the cases it covers, no internal ids, and only
    commands that run in a fresh shell."""
    g = grade_dir(ROOT / "tests/data/problems/glu/broken/overflowing_sigmoid", cases=("inf_nan/*",))
    md_path, _ = write_student_report(g, tmp_path)
    md = md_path.read_text()
    special = hints.text(hints.load("glu"), "dist", "special")
    assert special and special in md, md
    overflow = hints.text(hints.load("glu"), "pattern", "hint-overflow")
    assert overflow and md.count(overflow) == 1, md  # once per report, not once per case
    assert "found in 3 cases: inf_nan/float32, inf_nan/float16, inf_nan/bfloat16" in md, md
    assert "hint hint-" not in md and "hint-overflow" not in md, md
    assert "python -m grader" not in md, md
    # The error figures: NaN counts first, and no max abs err that ignores the NaNs without saying so.
    out = next(t.output for t in g.tests if t.extra.get("case") == "inf_nan/float32")
    lines = out.splitlines()
    assert "elements wrong" in lines[1] and lines[2].strip().startswith("NaN: expected"), out
    assert "NaN/inf, not in it" in out or "max abs err" not in out, out
