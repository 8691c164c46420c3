import os

import pytest
import torch

# CI is a 2-core CPU: keep every test single-threaded and offline.
torch.set_num_threads(1)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def lab():
    from xlrepro.papers.dufter2020.lab import load_lab
    return load_lab()
