"""Names of the Wu & Dredze package read by its registry entry (`__init__`) and by its modules alike."""

PARTS = ("select", "zero-shot", "in-language", "frozen", "all")  # the parts of `transfer.run_part`
MODELS = ("lab", "smoke")  # the plan's encoders (experiments.yaml, `models`)
PARAPHRASE_ARTIFACT = "paraphrase"  # the paraphrase task's published CSV (book/results/wu2019/paraphrase.csv)

# The chapters whose paper profile (the paper's own data and mBERT) has no path yet: the one-line error each gives.
# Every chapter has one now: Q1 Table 3 (`xnli.py`), Q2 Figure 1's XNLI panel (`xnli.XnliLab.frozen`), Q3 the
# language-identification probe (`language_id.py`), Q4 the overlap against XNLI transfer.
PAPER_MISSING: dict[str, str] = {}

# What each chapter's paper path leaves out of the paper's figure, said in the chapter's notice.
PAPER_LEFT_OUT = {
    "q2_layers": "Figure 1's other panels are not run: MLDoc, NER, POS and parsing (`mldoc.py`, `ner.py`, `pos.py` "
                 "and `parsing.py` fine-tune the whole encoder; no frozen variant yet). The feature-based row is our "
                 "mix of every layer, without the paper's BiLSTM.",
    "q4_subword_overlap": "Figure 3's other panels are not run: MLDoc, NER, POS and parsing (`mldoc.table2`, "
                          "`ner.table4`, `pos.table5`, `parsing.table6` exist as package functions, not yet read "
                          "here).",
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
