"""xlrepro: replications of four papers on why multilingual BERT is cross-lingual.

Pipeline: data -> tokenization/transforms -> models/training -> evaluation -> rendering.
"""
__version__ = "0.1.0"
