"""Names of the Wu & Dredze package read by its registry entry (`__init__`) and by its modules alike."""

PARTS = ("select", "zero-shot", "in-language", "frozen", "all")  # the parts of `transfer.run_part`
MODELS = ("lab", "smoke")  # the plan's encoders (experiments.yaml, `models`)
PARAPHRASE_ARTIFACT = "paraphrase"  # the paraphrase task's published CSV (book/results/wu2019/paraphrase.csv)
