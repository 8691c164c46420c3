"""Names of the K et al. 2020 package read by its registry entry (`__init__`) and by its modules alike."""

CHAPTERS = ("linguistic", "architecture", "input_objective", "mixed_pairs")  # book/k2020/<chapter>
CHECKPOINT_SECONDS = 180  # a training run saves its checkpoint at least this often
