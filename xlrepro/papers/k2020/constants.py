"""Names of the K et al. 2020 package read by its registry entry (`__init__`) and by its modules alike."""

CHAPTERS = ("linguistic", "architecture", "input_objective", "mixed_pairs")  # book/k2020/<chapter>
CHECKPOINT_SECONDS = 180  # a training run saves its checkpoint at least this often
# the parts of experiments.yaml each chapter reads (its tables' cells)
PARTS = {"linguistic": ("t1", "t1g", "t2", "t3"), "architecture": ("t4", "t5", "t6", "t7"),
         "input_objective": ("t8", "t8c", "t9", "t10"), "mixed_pairs": ("t11", "t11a")}
