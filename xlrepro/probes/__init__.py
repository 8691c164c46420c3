"""GPU diagnostics beside `xlrepro bench`, each run as ``python -m xlrepro.probes.<name>`` on a GPU machine; their
published results are under ``book/results/bench/`` and read by the engineering appendix.

- ``base``: where a BERT-base training step goes, and what bounds it (kernel profiles of the bench's engines and their
  variants, the matrix products alone, attention alone).
- ``noise``: the per-model draws' int32 hash gives the same bits as its int64 form on the GPU, eager and compiled.

A probe of one paper's models lives in that paper's package (its ``speed_probe``).
"""
