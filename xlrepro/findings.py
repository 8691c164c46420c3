"""The book's findings page, generated from the published verdicts (``book/results/<paper>/claims.csv``).

`render_findings` turns the claims files into one MyST page: per paper, the counts of verdicts, one table of its
claims (section, claim, our evidence, verdict, the chapter that tests it) and the claims it does not reproduce.
The undecided claims are grouped by the first code of claims.csv's ``reason`` column (:data:`xlrepro.claims.REASONS`),
put in words from the paper's claims file (a precondition's or null's ``says``).
Papers of the registry (`xlrepro.papers`) and those announced in ``xlrepro/papers/planned.yaml`` without a
package yet are listed in book order; a paper without a claims file is shown as pending. Nothing is written by
hand, so the page cannot drift from the CSVs: `write_findings` (``python -m xlrepro.findings``, run by ``make
book`` and ``xlrepro reproduce``) rewrites ``book/findings.md`` and a test checks the committed page against it.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from .atomic import atomic_open
from .claims import INCONCLUSIVE, NOT, OFFLINE, PARTLY, PENDING, REASON_SEP, REPRODUCED, VERDICTS, reason_words
from .paths import repo_root

PAGE = Path("book") / "findings.md"
VERDICT_MARK = {REPRODUCED: "**reproduced**", PARTLY: "**partly**", NOT: "**not reproduced**",
                INCONCLUSIVE: "**inconclusive**",
                OFFLINE: "**not testable offline**", PENDING: "*pending (awaits its GPU run)*"}


@dataclass(frozen=True)
class BookPaper:
    name: str          # e.g. "smith2021": the chapters' folder, the results folder and the references.bib key
    title: str
    chapters: tuple[str, ...]  # '<folder>/<notebook>' in book order; empty for a planned paper
    order: int


def book_papers(planned: str | os.PathLike | None = None) -> list[BookPaper]:
    """The registry's papers (not the parts they share) and the planned ones without a package, in book order."""
    from .papers import papers

    found = {p.name: BookPaper(p.name, p.title, tuple(p.chapters), p.order) for p in papers("paper").values()}
    path = Path(planned) if planned else Path(__file__).parent / "papers" / "planned.yaml"
    for entry in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("planned", []):
        unknown = set(entry) - {"name", "title", "order"}
        if unknown or not {"name", "title"} <= set(entry):
            raise ValueError(f"{path}: each planned paper has name, title and optionally order; got {entry}")
        found.setdefault(entry["name"], BookPaper(entry["name"], entry["title"], (), int(entry.get("order", 100))))
    return sorted(found.values(), key=lambda p: (p.order, p.name))


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>$|#~])")


def md_text(text: object) -> str:
    """`text` as literal Markdown inline text: special characters escaped, whitespace folded to single spaces."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def verdict_counts(claims: pd.DataFrame) -> dict[str, int]:
    """How many claims got each verdict, in the order of `xlrepro.claims.VERDICTS` (zeros included)."""
    bad = sorted(set(claims["verdict"]) - set(VERDICTS))
    if bad:
        raise ValueError(f"unknown verdicts {bad}; valid verdicts: {', '.join(VERDICTS)}")
    return {v: int((claims["verdict"] == v).sum()) for v in VERDICTS}


def _chapter_doc(paper: BookPaper, chapter: str) -> str | None:
    """The page (relative to book/) of a claims.csv `chapter` value, e.g. 'ch' -> 'smith2021/ch'."""
    for full in paper.chapters:
        if full == chapter or full.split("/")[-1] == chapter:
            return full
    return None


def _claims_by_id(paper: str, claims_dir: Path | None) -> dict[str, dict]:
    """The paper's claims (:func:`xlrepro.claims.load_claims`) by id, from ``<claims_dir>/<paper>/claims.yaml``
    (default the package's); empty where the paper has no claims file."""
    from .claims import load_claims
    from .selections import claims_path
    path = claims_dir / paper / "claims.yaml" if claims_dir is not None else claims_path(paper)
    return {c["id"]: c for c in load_claims(paper, path)} if path.is_file() else {}


def _paper_section(paper: BookPaper, results: Path, claims_dir: Path | None = None) -> list[str]:
    out = [f"## {paper.title}", "", f"{{cite:t}}`{paper.name}`", ""]
    path = results / paper.name / "claims.csv"
    if not paper.chapters:
        return out + ["```{admonition} Not covered yet", ":class: note",
                      "This paper's chapters are not written yet: none of its claims has been tested, and the book "
                      "reports no numbers for it.", "```", ""]
    if not path.is_file():
        return out + ["```{admonition} No verdicts yet", ":class: note",
                      "The chapters of this paper have not been published with a claims table yet.", "```", ""]
    claims = pd.read_csv(path, dtype=str, keep_default_na=False)
    counts = verdict_counts(claims)
    out += [f"{len(claims)} claims: " + ", ".join(f"**{n}** {v}" for v, n in counts.items()) + ".", ""]
    if (claims["verdict"] == INCONCLUSIVE).any() and "reason" not in claims.columns:
        raise ValueError(f"{path} has no reason column (it predates it): run `xlrepro verdicts {paper.name}`")
    out += _at_a_glance(claims, _claims_by_id(paper.name, claims_dir))
    out += ["Every claim with our evidence:", ""]
    out += ["```{list-table}", ":header-rows: 1", ":widths: 12 36 36 16", ":class: xl-findings", "",
            "* - Section", "  - Claim", "  - Our evidence", "  - Verdict"]
    for row in claims.itertuples(index=False):
        doc = _chapter_doc(paper, row.chapter)
        link = f" ({{doc}}`{md_text(doc.split('/')[-1].replace('_', ' '))} <{doc}>`)" if doc else ""
        out += [f"* - {md_text(row.section)}", f"  - {md_text(row.claim)}", f"  - {md_text(row.evidence)}",
                f"  - {VERDICT_MARK[row.verdict]}{link}"]
    out += ["```", ""]
    return out


def _why_undecided(row: Mapping, claims: Mapping[str, Mapping]) -> str:
    """The first reason an inconclusive claims.csv row gives (its ``reason`` column), in a few words: a precondition
    not met or a null model that passes (named by what the claims file says of it), too few seeds, a test that could
    not pass at its seed count, every run of a model failed."""
    code = str(row.get("reason") or "").split(REASON_SEP)[0]
    if not code:
        raise ValueError(f"inconclusive claim {row.get('id') or row.get('claim')!r} has no reason in claims.csv: "
                         f"rerun `xlrepro verdicts`")
    return reason_words(code, claims.get(str(row.get("id", ""))))


def _bullets(rows) -> list[str]:
    return [f"- {md_text(r.claim)} ({md_text(r.section)})" for r in rows.itertuples(index=False)]


def _at_a_glance(claims: pd.DataFrame, by_id: Mapping[str, Mapping] | None = None) -> list[str]:
    """What held, what did not, and what the experiments could not decide, grouped by why, from the verdicts alone."""
    out = []
    for verdict, lead in ((REPRODUCED, "**What held**"), (PARTLY, "**Partly**"),
                          (NOT, "**What did not hold here** (the test was decided and contradicts the paper)")):
        rows = claims[claims["verdict"] == verdict]
        if len(rows):
            out += [f"{lead} ({len(rows)}):", "", *_bullets(rows), ""]
    undecided = claims[claims["verdict"] == INCONCLUSIVE]
    if len(undecided):
        groups: dict[str, list] = {}
        for r in undecided.itertuples(index=False):  # the first reason decides the group
            groups.setdefault(_why_undecided(r._asdict(), by_id or {}), []).append(r)
        out += [f"**Undecided** ({len(undecided)}): the experiment cannot decide these claims, for these reasons "
                f"(the first each claim gives; its evidence below gives them all):", ""]
        for reason, rows in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            out.append(f"- *{md_text(reason)}*: " + "; ".join(f"{md_text(r.claim)} ({md_text(r.section)})"
                                                             for r in rows))
        out.append("")
    if not (claims["verdict"] == NOT).any():
        out += ["No tested claim of this paper is contradicted by a decided test.", ""]
    return out


def render_findings(results: str | os.PathLike | None = None, planned: str | os.PathLike | None = None,
                    claims_dir: str | os.PathLike | None = None) -> str:
    """The findings page (MyST Markdown) from ``<results>/<paper>/claims.csv`` (default ``book/results``), the
    reasons of undecided claims put in words from ``<claims_dir>/<paper>/claims.yaml`` (default the package's)."""
    results = Path(results) if results is not None else repo_root() / "book" / "results"
    lines = ["<!-- Generated by `python -m xlrepro.findings` from book/results/*/claims.csv: do not edit. -->", "",
             "# Findings", "",
             "Every claim the book tests, paper by paper, with the verdict of this replication. A claim is the "
             "paper's sentence, tested by a criterion fixed before the run (the chapter shows the criterion and "
             "the paper's words); *partly* means one of the criterion's two conditions holds (for a claim of "
             "several parts, that the parts score at least half); *inconclusive* that the experiment cannot decide "
             "the claim: a precondition of the test failed (the model never learned what the claim is about), a "
             "null model passes the test too, or the run has too few seeds for it; *not testable offline* that the "
             "test needs a resource this machine cannot download (see {doc}`intro`). Failed runs are left out of "
             "every mean and named in the evidence (each paper's `health.csv`). Each verdict links to the chapter "
             "that tests it.", ""]
    for paper in book_papers(planned):
        lines += _paper_section(paper, results, Path(claims_dir) if claims_dir is not None else None)
    return "\n".join(lines).rstrip("\n") + "\n"


def write_findings(root: str | os.PathLike | None = None) -> Path:
    """Rewrite ``book/findings.md`` under `root` (default: the repository) from its ``book/results``."""
    root = Path(root) if root is not None else repo_root()
    path = root / PAGE
    text = render_findings(root / "book" / "results")
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        with atomic_open(path) as f:
            f.write(text)
    return path


if __name__ == "__main__":
    print(f"wrote {write_findings().relative_to(repo_root())}", file=sys.stderr)
