"""Every chapter notebook runs end to end through papermill with tiny parameters (CI's smoke run)."""
from pathlib import Path

import papermill
import pytest

from .liu_gpu_fixture import KNOWN, RESULT_FILES, make_liu_gpu_results, make_liu_shared_results

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
    "k2020/mixed_pairs": {**K2020, "experiments": ["enfake-es", "enfake-es/adj"]},
    # without German: its FreeDict dictionaries (978k entries) take 14-33 s to parse, French and Spanish a few
    "multilingual/lab": {"model": "smoke", "languages": ["en", "fr", "es"], "retrieval_sentences": 50,
                         "dictionary_words": 100},
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


# Once the last cell has run, the kernel is killed rather than asked to exit: the notebook's outputs and the files it
# wrote are complete by then, and a kernel that has imported torch takes about 1.5 s more to exit on its own.
SHUTDOWN_KERNEL = "immediate"

# The kernels inherit conftest's XLREPRO_CACHE and XLREPRO_RUNS: smoke runs stay out of the repository, and the
# prepared Bible, the lab data and the smoke encoder are shared with the other tests.
pytestmark = pytest.mark.usefixtures("multilingual_cache", "lab")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_notebook_runs(notebook, tmp_path):
    out = tmp_path / notebook.name
    results = tmp_path / "results"
    parameters = {**tiny_parameters(notebook), "results": str(results)}
    if notebook.parent.name == "liu2020":
        from xlrepro.data.dictionaries import freedict_paths, install_hint
        missing = [lang for lang in ("fr", "ru", "es") if not freedict_paths(lang)]
        assert not missing, (f"the word-translation smoke run needs FreeDict dictionaries: run `make dictionaries` "
                             f"({'; '.join(install_hint(lang) for lang in missing)})")
        # a hand-made GPU run (tests/liu_gpu_fixture.py): every cell shows results
        # ru besides es and fr: Table 4's claim tests es and fr apart from the other targets (ru, not de: German's
        # FreeDict dictionaries, 978k entries, take 14-33 s to parse; Russian's English-Russian one a fraction of a second)
        langs = ("en", "fr", "ru", "es")
        parameters = {**parameters, "languages": list(langs),
                      "gpu_results": str(make_liu_gpu_results(tmp_path / "gpu", langs))}
        make_liu_shared_results(results, langs)  # the claims' preconditions read them
    papermill.execute_notebook(str(notebook), str(out), parameters=parameters, kernel_name="python3",
                               cwd=str(notebook.parent), progress_bar=False, shutdown_kernel=SHUTDOWN_KERNEL)
    text = out.read_text()
    assert '"output_type": "error"' not in text
    check_result_files(f"{notebook.parent.name}/{notebook.stem}", results)
    if notebook.parent.name == "liu2020":
        check_liu_chapter(notebook.stem, tmp_path / "results", text)


# The files each chapter's smoke run writes into its results folder, besides claims.csv (where it has claims) and
# its run record. A chapter that stops writing one of them, or writes it empty, fails here.
RESULT_CSVS = {
    "dufter2020/architecture": ["table1"], "dufter2020/comparability": ["table2"], "dufter2020/engineering": [],
    "dufter2020/knn_replace": ["fig7", "knn_table", "table10"], "dufter2020/setup": ["runtime"],
    "dufter2020/training_dynamics": ["fig6"],
    "k2020/architecture": ["architecture"], "k2020/input_objective": ["input_objective", "tokenization"],
    "k2020/linguistic": ["linguistic", "overlap"], "k2020/mixed_pairs": ["mixed_pairs"],
    "liu2020/context_window": ["retrieval_bert", "transfer", "word2vec_windows"],
    "liu2020/language_information": ["language_id", "mds_grid", "table4", "vocabulary"],
    "liu2020/part_of_speech": ["pos"],
    "liu2020/static_vs_bert": ["corpus", "dictionaries", "retrieval", "retrieval_bert", "transfer"],
    "multilingual/lab": ["corpus", "dictionaries", "retrieval", "task"],
    "wu2019/q1_zero_shot": ["zero_shot"], "wu2019/q2_layers": ["frozen"], "wu2019/q3_language_id": ["language_id"],
    "wu2019/q4_subword_overlap": ["overlap"],
}
WITHOUT_CLAIMS = {"dufter2020/engineering", "dufter2020/setup", "multilingual/lab"}
LONG_COLUMNS = {"experiment", "metric", "value"}


def check_result_files(name: str, results: Path) -> None:
    """The smoke run wrote its result files: every CSV named in RESULT_CSVS with rows (the long-format ones with
    experiment / metric / value and finite values), its run record, and claims.csv with this chapter's claims, each
    with a section, a criterion and one of the verdicts."""
    import json
    import math

    import pandas as pd
    from xlrepro.results import VERDICTS, read_claims
    assert name in RESULT_CSVS, f"{name}: add the files its smoke run writes to RESULT_CSVS"
    chapter = name.split("/")[1]
    for csv in RESULT_CSVS[name]:
        df = pd.read_csv(results / f"{csv}.csv")
        assert len(df), f"{name}: {csv}.csv has no rows"
        if LONG_COLUMNS <= set(df.columns):
            assert df["value"].map(lambda v: isinstance(v, (int, float)) and not math.isnan(v)).any(), (name, csv)
    if name == "k2020/mixed_pairs":  # Table 11 on the adjacency task: each /adj cell on its target and mixed pairs
        adj = pd.read_csv(results / "mixed_pairs.csv").query("metric == 'adjacency_accuracy'")
        assert set(adj["experiment"]) == {"enfake-es/adj", "majority/enfake-es/adj"}, name
        assert set(adj["language"]) == {"enfake", "es", "enfake>es", "es>enfake"}, name
    record = json.loads((results / f"run_record_{chapter}.json").read_text())
    assert record, f"{name}: empty run record"
    if name in WITHOUT_CLAIMS:
        return
    claims = read_claims(results / "claims.csv")
    mine = claims[claims["chapter"] == chapter]
    assert len(mine), f"{name}: no claims of this chapter in claims.csv"
    assert {"section", "criterion", "verdict"} <= set(mine.columns)
    assert (mine["section"] != "").all() and (mine["criterion"] != "").all(), name
    assert set(mine["verdict"]) <= set(VERDICTS), (name, set(mine["verdict"]))


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


# A kernel of its own (~7 s) for one check that runs in `make test` without one: chapter_run names the valid profiles
# (test_grid.py::test_bad_parameters_name_the_valid_choices), and the dufter2020 smoke runs above pass their
# parameters through the same chapter_setup call.
@pytest.mark.slow
def test_bad_parameter_stops_with_the_valid_choices(tmp_path):
    with pytest.raises(papermill.PapermillExecutionError, match="valid choices: lab, paper"):
        papermill.execute_notebook(str(NOTEBOOKS[0]), str(tmp_path / "bad.ipynb"),
                                   parameters={**TINY, "profile": "wikipedia"}, kernel_name="python3",
                                   progress_bar=False, shutdown_kernel=SHUTDOWN_KERNEL)
