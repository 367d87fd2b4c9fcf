"""README statements that a test keeps true (issue 40 item 11): no count of tests, which every new test made wrong
(the README said 1043 passed while the suite had 1072), and what `glu-grade grade` grades by default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader import cli
from grader.problem import layout
from grader.problem.spec import default_problem, load_problem

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "assignment/README.md"]
# "1043 passed", "49 skipped", "1,334 tests", "2 xfailed": a number of tests, in any of pytest's words
COUNT = re.compile(r"\b\d[\d,]* (?:passed|failed|skipped|xfailed|deselected|tests\b|selected)")


@pytest.mark.parametrize("doc", DOCS)
def test_no_test_count_that_rots(doc):
    text = " ".join((ROOT / doc).read_text(encoding="utf-8").split())  # counts wrap across lines too
    found = COUNT.findall(text)
    assert not found, f"{doc} states test counts {found}: pytest's last line says them; the README must not"


def test_the_default_submission_is_the_default_problems_folder(tmp_path, monkeypatch, capsys):
    """README: `kernel-grader grade` (an installed grader, run from a folder with assignment/) grades ./assignment/glu/."""
    problem = load_problem(default_problem(ROOT))
    assert problem.name == "glu" and problem.folder == "glu"
    (tmp_path / "assignment" / "glu").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    got = layout.locate(Path("assignment"), problem).path
    assert got.resolve() == (tmp_path / "assignment" / "glu").resolve()
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "`kernel-grader grade` grades `./assignment/glu/`" in readme
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["grade", "--help"])
    help_text = " ".join(cli._parser().format_help().split()) + " ".join(capsys.readouterr().out.split())
    assert "default: assignment/<problem>/" in help_text and "(default: assignment/)" not in help_text
