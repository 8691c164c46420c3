"""Every chapter notebook runs end to end through papermill with tiny parameters (CI's smoke run)."""
from pathlib import Path

import papermill
import pytest

from .liu_gpu_fixture import KNOWN, RESULT_FILES, make_liu_gpu_results

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*/*.ipynb"))
# Dufter & Schütze: 4 sentences per language, batches of 4: 2 steps per model (BERT-base ones too).
TINY = {"epochs": 1, "max_sentences": 4, "batch_size": 4, "seeds": [0]}
# The multilingual chapters run the plan's tiny "smoke" encoder (pretrained on the CPU in seconds) on four languages.
SMOKE_LANGS = ["en", "fr", "de", "es"]
TRANSFER = {"model": "smoke", "seeds": [0], "languages": SMOKE_LANGS, "max_train_pairs": 64, "max_test_pairs": 40,
            "epochs": 1}
# K et al. 2020: the smoke profile's tiny B-BERTs, trained in the notebook, one experiment per chapter.
K2020 = {"profile": "smoke", "train": True, "experiments": ["enfake-es"], "seeds": [0]}
PARAMETERS = {
    "dufter2020/engineering": {},  # reads recorded GPU probes only
    "k2020/input_objective": {**K2020, "experiments": ["enfake-es/word"]},
    "multilingual/lab": {"model": "smoke", "languages": SMOKE_LANGS, "retrieval_sentences": 50, "dictionary_words": 100},
    # Liu et al.: three languages (small dictionaries), 3 chapters (small) / 15 (big), 16-d static embeddings, one pass
    **{f"liu2020/{n}": {"languages": ["en", "fr", "es"], "max_chapters": 3, "dim": 16, "epochs": 1}
       for n in ("static_vs_bert", "context_window", "part_of_speech", "language_information")},
    "wu2019/q3_language_id": {"model": "smoke", "seeds": [0], "languages": SMOKE_LANGS, "train_per_language": 60,
                              "test_per_language": 30},
}


def tiny_parameters(notebook: Path) -> dict:
    name = f"{notebook.parent.name}/{notebook.stem}"
    if notebook.parent.name == "k2020":
        return PARAMETERS.get(name, K2020)
    return PARAMETERS.get(name, TRANSFER if notebook.parent.name == "wu2019" else TINY)


# The kernels inherit conftest's XLREPRO_CACHE and XLREPRO_RUNS: smoke runs stay out of the repository, and the
# prepared Bible, the lab data and the smoke encoder are shared with the other tests.
pytestmark = pytest.mark.usefixtures("multilingual_cache", "lab")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_notebook_runs(notebook, tmp_path):
    out = tmp_path / notebook.name
    parameters = tiny_parameters(notebook)
    if notebook.parent.name == "liu2020":  # a hand-made GPU run (tests/liu_gpu_fixture.py): every cell shows results
        # de, not es: Table 4's claim leaves out en, es and fr
        parameters = {**parameters, "languages": ["en", "fr", "de"], "results": str(tmp_path / "results"),
                      "gpu_results": str(make_liu_gpu_results(tmp_path / "gpu", ("en", "fr", "de")))}
    papermill.execute_notebook(str(notebook), str(out), parameters=parameters, kernel_name="python3",
                               cwd=str(notebook.parent), progress_bar=False)
    text = out.read_text()
    assert '"output_type": "error"' not in text
    if notebook.parent.name == "liu2020":
        check_liu_chapter(notebook.stem, tmp_path / "results", text)


def check_liu_chapter(chapter: str, results: Path, text: str) -> None:
    """Every claim of the chapter has a verdict (none pending), the verdicts the hand-made numbers decide are those,
    its result files are written, its figures drawn, and no "pending the GPU run" note is left."""
    from xlrepro.results import read_claims
    claims = read_claims(results / "claims.csv")
    mine = claims[claims["chapter"] == chapter]
    assert len(mine) and "pending" not in set(mine["verdict"]), mine[["claim", "verdict", "evidence"]].to_string()
    for claim, verdict in KNOWN.items():
        if claim in set(mine["claim"]):
            row = mine[mine["claim"] == claim].iloc[0]
            assert row["verdict"] == verdict, (claim, row["verdict"], row["evidence"])
    for name in RESULT_FILES[chapter]:
        assert (results / f"{name}.csv").exists(), name
    assert "image/png" in text and "pending the GPU run" not in text


def test_bad_parameter_stops_with_the_valid_choices(tmp_path):
    with pytest.raises(papermill.PapermillExecutionError, match="valid choices: lab, paper"):
        papermill.execute_notebook(str(NOTEBOOKS[0]), str(tmp_path / "bad.ipynb"),
                                   parameters={**TINY, "profile": "wikipedia"}, kernel_name="python3",
                                   progress_bar=False)
