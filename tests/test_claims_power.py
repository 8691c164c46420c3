"""Power and null checks of every paper's claims, on the published results: a claim must be able to pass at the seed
count it asks for, must not be passed by a declared null model, and the published verdicts must be the ones its
claims file gives today (claims.csv recomputed from book/results)."""
import functools
import math
from pathlib import Path

import pandas as pd
import pytest

from xlrepro import claims as C
from xlrepro.health import exclusions
from xlrepro.results import read_claims
from xlrepro.papers import get_paper
from xlrepro.verdicts import paper_frames, recipe_frames

ROOT = Path(__file__).resolve().parents[1]
PAPERS = sorted(p.parent.name for p in (ROOT / "xlrepro" / "papers").glob("*/claims.yaml"))


@functools.lru_cache(maxsize=None)
def _judged(paper):
    """(claim, Data after judging it, Judgement) for every claim of `paper` whose results are published."""
    folder = ROOT / "book" / "results" / paper
    frames, health = paper_frames(paper, folder)
    failed = exclusions(health)
    claims = C.load_claims(paper)
    stronger = {ch: C.prepare_recipes(paper, frames[ch], recipe_frames(get_paper(paper), ch, folder))
                for ch in frames}  # a claim is read on the strongest recipe holding its models, as claims_table does
    out = []
    for c in claims:
        data = C.Data(frames[c["chapter"]], paper, c.get("artifact"), excluded=failed)
        try:
            judged = (c, data, C.judge(c, data))
        except (C.Pending, C.MissingResults):
            judged = None
        read = C.read_on_recipes(c, stronger[c["chapter"]], paper, base_read=data.read if judged else None)
        if read is not None:
            out.append((c, *read))
        elif judged is not None:
            out.append(judged)
    return out


@pytest.mark.parametrize("paper", PAPERS)
def test_every_equivalence_test_can_pass_at_the_seeds_it_asks_for(paper):
    """k SE < tolerance for every within/flat comparison, at the claim's min_seeds where it asks for more seeds than
    the run has (the standard error scaled by sqrt(n / min_seeds))."""
    bad = []
    for c, data, _ in _judged(paper):
        for kse, tol, n in data.power:
            need = c.get("min_seeds") or n
            projected = kse * math.sqrt(n / max(need, n)) if n > 1 else kse
            if not projected < tol:
                bad.append(f"{c['id']}: k SE {kse:.3g} at {n} seeds (projected {projected:.3g} at {need}) ≥ "
                           f"tolerance {tol:.3g}")
    assert not bad, "criteria that cannot pass (raise min_seeds or restate them, saying why):\n" + "\n".join(bad)


@pytest.mark.parametrize("paper", PAPERS)
def test_no_claim_is_reproduced_when_a_declared_null_passes(paper):
    for c, data, j in _judged(paper):
        for n in c.get("nulls") or []:
            nv, ne = C.evaluate(C.with_null(c["test"], n), C.Data(data.frames, paper, c.get("artifact"),
                                                                   excluded=data.excluded))
            if nv == C.REPRODUCED:
                assert j.verdict not in (C.REPRODUCED, C.PARTLY), (c["id"], n["says"], ne)


@pytest.mark.parametrize("paper", PAPERS)
def test_published_verdicts_are_the_claims_files_verdicts(paper):
    """book/results/<paper>/claims.csv is what `xlrepro verdicts` gives today: a changed claims file was republished."""
    published = read_claims(ROOT / "book" / "results" / paper / "claims.csv")
    assert "id" in published.columns, f"{paper}: claims.csv predates the id column: run `xlrepro verdicts {paper}`"
    have = dict(zip(published["id"], published["verdict"]))
    now = {c["id"]: j.verdict for c, _, j in _judged(paper)}
    stale = {k: (have.get(k), v) for k, v in now.items() if have.get(k) != v}
    assert not stale, f"{paper}: claims.csv is stale (published, now): {stale}; run `xlrepro verdicts {paper}`"
