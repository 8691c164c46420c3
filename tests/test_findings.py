"""The findings page: generated from the claims files, and the committed page is the generated one."""
from pathlib import Path

import pandas as pd
import pytest

from xlrepro.findings import md_text, render_findings, verdict_counts
from xlrepro.paths import repo_root

ROOT = Path(__file__).resolve().parents[1]


def _planned(tmp_path, text="planned:\n  - {name: zz2099, title: 'Zed 2099, A Paper Not Written Yet', order: 999}\n"):
    path = tmp_path / "planned.yaml"
    path.write_text(text)
    return path


def test_committed_findings_page_matches_the_claims_files():
    page = ROOT / "book" / "findings.md"
    assert page.read_text(encoding="utf-8") == render_findings(ROOT / "book" / "results"), (
        "book/findings.md is out of date with book/results/*/claims.csv: run `python -m xlrepro.findings`")


def test_counts_every_verdict_and_rejects_unknown_ones():
    claims = pd.DataFrame({"verdict": ["reproduced", "partly", "reproduced", "not testable offline"]})
    assert verdict_counts(claims) == {"reproduced": 2, "partly": 1, "not reproduced": 0, "inconclusive": 0,
                                      "not testable offline": 1, "pending": 0}
    with pytest.raises(ValueError, match="valid verdicts"):
        verdict_counts(pd.DataFrame({"verdict": ["maybe"]}))


def test_markdown_specials_are_escaped():
    assert md_text("|0 mu − 0.7| < 2 [x] $a$ *b*") == r"\|0 mu − 0.7\| \< 2 \[x\] \$a\$ \*b\*"
    assert md_text("a\n  b") == "a b"


CLAIMS_YAML = """\
preconditions:
  base_transfers:
    says: the base transfers
    test: {kind: above, value: {experiment: base, metric: acc}, bound: 0.25, noise: 2se}
claims:
  - {id: c, chapter: training_dynamics, section: "§3", quote: q, claim: C holds., why: w, artifact: t,
     requires: [base_transfers], test: {kind: above, value: {experiment: x, metric: acc}, bound: 0.5, noise: 2se}}
  - {id: d, chapter: training_dynamics, section: "§4", quote: q, claim: D holds., why: w, artifact: t, min_seeds: 5,
     test: {kind: above, value: {experiment: x, metric: acc}, bound: 0.5, noise: 2se}}
  - {id: e, chapter: training_dynamics, section: "§5", quote: q, claim: E holds., why: w, artifact: t,
     requires: [base_transfers], test: {kind: above, value: {experiment: x, metric: acc}, bound: 0.5, noise: 2se}}
"""


def test_page_from_hand_made_claims(tmp_path):
    results, papers = tmp_path / "results", tmp_path / "papers"
    (results / "dufter2020").mkdir(parents=True)
    (papers / "dufter2020").mkdir(parents=True)
    (papers / "dufter2020" / "claims.yaml").write_text(CLAIMS_YAML)
    undecided = {"criterion": "c", "verdict": "inconclusive", "chapter": "training_dynamics",
                 "evidence": "Inconclusive: words the page does not parse. The test itself: not reproduced, x"}
    pd.DataFrame([
        {"id": "a", "claim": "A holds.", "section": "§1", "criterion": "c", "evidence": "a = 1 | b",
         "verdict": "reproduced", "chapter": "architecture", "reason": ""},
        {"id": "b", "claim": "B holds.", "section": "§2", "criterion": "c", "evidence": "b = 0.1 vs 0.7", "verdict":
         "not reproduced", "chapter": "training_dynamics", "reason": ""},
        {"id": "c", "claim": "C holds.", "section": "§3", **undecided, "reason": "precondition:base_transfers"},
        {"id": "d", "claim": "D holds.", "section": "§4", **undecided, "reason": "min_seeds;underpowered"},
        {"id": "e", "claim": "E holds.", "section": "§5", **undecided,
         "reason": "precondition:base_transfers;min_seeds"},
    ]).to_csv(results / "dufter2020" / "claims.csv", index=False)
    page = render_findings(results, _planned(tmp_path), papers)
    dufter = page[page.index("## Dufter"):page.index("## Wu")]
    assert ("5 claims: **1** reproduced, **0** partly, **1** not reproduced, **3** inconclusive, **0** not testable "
            "offline, **0** pending." in dufter)
    assert "{doc}`architecture <dufter2020/architecture>`" in dufter
    assert "{doc}`training dynamics <dufter2020/training_dynamics>`" in dufter
    assert r"a = 1 \| b" in dufter
    glance = dufter[dufter.index("**What held**"):dufter.index("Every claim with our evidence")]
    assert "**What held** (1):\n\n- A holds. (§1)" in glance and "- B holds. (§2)" in glance
    undecided = glance[glance.index("**Undecided** (3)"):]
    groups = [line for line in undecided.splitlines() if line.startswith("- ")]
    assert groups == ["- *precondition not met: the base transfers*: C holds. (§3); E holds. (§5)",  # largest first
                      "- *the run has fewer seeds than the 5 the test needs*: D holds. (§4)"]
    assert "The test itself" not in undecided and "A holds." not in undecided and "parse" not in undecided
    wu = page[page.index("## Wu"):page.index("## Zed")]
    assert "No verdicts yet" in wu                              # registered, but no claims.csv here
    zed = page[page.index("## Zed"):]
    assert "Not covered yet" in zed and "{cite:t}`zz2099`" in zed
    assert page.index("## Dufter") < page.index("## Wu") < page.index("## Zed")  # book order


def test_an_undecided_claim_without_a_reason_names_the_fix(tmp_path):
    (tmp_path / "dufter2020").mkdir()
    row = {"id": "c", "claim": "C", "section": "§3", "criterion": "c", "evidence": "e", "verdict": "inconclusive",
           "chapter": "architecture"}
    pd.DataFrame([row]).to_csv(tmp_path / "dufter2020" / "claims.csv", index=False)
    with pytest.raises(ValueError, match="no reason column .* run `xlrepro verdicts dufter2020`"):
        render_findings(tmp_path, _planned(tmp_path))
    pd.DataFrame([{**row, "reason": ""}]).to_csv(tmp_path / "dufter2020" / "claims.csv", index=False)
    with pytest.raises(ValueError, match="inconclusive claim 'c' has no reason"):
        render_findings(tmp_path, _planned(tmp_path))


def test_a_registered_paper_wins_over_its_planned_entry(tmp_path):
    page = render_findings(tmp_path, _planned(tmp_path, "planned:\n  - {name: wu2019, title: Old title}\n"))
    assert "Old title" not in page and page.count("{cite:t}`wu2019`") == 1


def test_planned_entries_are_checked(tmp_path):
    with pytest.raises(ValueError, match="name, title"):
        render_findings(tmp_path, _planned(tmp_path, "planned:\n  - {name: x, titel: y}\n"))
