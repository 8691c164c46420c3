"""Names of the Wu & Dredze package read by its registry entry (`__init__`) and by its modules alike."""

PARTS = ("select", "zero-shot", "in-language", "frozen", "all")  # the parts of `transfer.run_part`
MODELS = ("lab", "smoke")  # the plan's encoders (experiments.yaml, `models`)
PARAPHRASE_ARTIFACT = "paraphrase"  # the paraphrase task's published CSV (book/results/wu2019/paraphrase.csv)

# The chapters whose paper profile (the paper's own data and mBERT) has no path yet: the one-line error each gives.
# q1_zero_shot's is `xnli.py` (Table 3).
PAPER_MISSING = {
    "q2_layers": "wu2019/q2_layers has no paper-profile path yet: Figure 1's layer freezing on mBERT needs the "
                 "fine-tuning code of `xnli.py` run with frozen layers, and MLDoc, NER, POS and parsing loaders "
                 "wired to it (xlrepro.resources has the readers: read_mldoc, read_iob, read_conllu). Use -p profile lab",
    "q3_language_id": "wu2019/q3_language_id has no paper-profile path yet: the language-identification probe on "
                      "mBERT needs per-language Wikipedia text (xlrepro.resources.read_wikiextractor, $XLREPRO_WIKI_DIR) "
                      "wired to the probe. Use -p profile lab",
    "q4_subword_overlap": "wu2019/q4_subword_overlap has no paper-profile path yet: the overlap analysis spans the "
                          "paper's tasks and needs mBERT's MLDoc, NER, POS and parsing transfer runs (readers in "
                          "xlrepro.resources; $XLREPRO_MLDOC_DIR, $XLREPRO_CONLL_DIR, $XLREPRO_UD_DIR) beside Table 3's. "
                          "Use -p profile lab",
}

PROFILE_FILE = "profile.json"  # in a paper-profile results folder: what it ran on (`xnli.mark_results`)


def results_profile(folder) -> str:
    """"paper" for a results folder that `xnli.mark_results` marked, else "lab" (also for a mapping of frames)."""
    import json
    import os
    from pathlib import Path

    if not isinstance(folder, (str, os.PathLike)):
        return "lab"
    path = Path(folder) / PROFILE_FILE
    return json.loads(path.read_text()).get("profile", "lab") if path.is_file() else "lab"
