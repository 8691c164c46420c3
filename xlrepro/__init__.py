"""xlrepro: replications of four papers on why multilingual BERT is cross-lingual.

Pipeline: data -> tokenization/transforms -> models/training -> evaluation -> rendering.
"""
__version__ = "0.1.0"

import warnings

# Notebooks run without ipywidgets; tqdm's rich progress bars then fall back to text, which is fine.
warnings.filterwarnings("ignore", message="IProgress not found")
