"""Names of the K et al. 2020 package read by its registry entry (`__init__`) and by its modules alike."""

CHAPTERS = ("linguistic", "architecture", "input_objective", "mixed_pairs")  # book/k2020/<chapter>
CHECKPOINT_SECONDS = 180  # a training run saves its checkpoint at least this often
# the parts of experiments.yaml each chapter reads (its tables' cells)
PARTS = {"linguistic": ("t1", "t1g", "t2", "t3"), "architecture": ("t4", "t5", "t6", "t7"),
         "input_objective": ("t8", "t8c", "t9", "t10"), "mixed_pairs": ("t11", "t11a")}
# the scaling profiles of experiments.yaml, weakest first (more text and steps later: stronger), with their labels;
# each publishes whichever base cells it trained (`pilots.publish`)
PILOTS = ("alltext", "alltext2x", "alltext4x", "alltext8x")
RECIPES = {"lab": "one edition, 4,000 steps", "alltext": "all the text, 4,000 steps",
           "alltext2x": "all the text, 8,000 steps", "alltext4x": "all the text, 16,000 steps",
           "alltext8x": "all the text, 32,000 steps"}
