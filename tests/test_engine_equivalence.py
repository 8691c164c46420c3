"""Same numbers: each paper's training path, at tiny sizes on the CPU, gives exactly the losses, metrics and
weights recorded in tests/fixtures/engine_equivalence/ (see tests/engine_equivalence.py for the runs and how to
record them). Single-threaded CPU float32 is deterministic, so the comparison is exact: a moved loop that changes
the order of any random draw or floating-point sum fails here."""
import json
import os

import pytest

from .engine_equivalence import FIXTURES, RECORDERS, finite

RECORD = os.environ.get("XLREPRO_RECORD_EQUIVALENCE") == "1"


@pytest.mark.parametrize("path", sorted(RECORDERS))
def test_training_path_gives_the_recorded_numbers(path, tmp_path, multilingual_cache, lab):
    got = json.loads(json.dumps(RECORDERS[path](tmp_path)))  # tuples -> lists, as the fixture holds them
    assert finite(got)
    fixture = FIXTURES / f"{path}.json"
    if RECORD:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        fixture.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(fixture.read_text())


def test_the_comparison_would_catch_a_changed_number():
    recorded = json.loads((FIXTURES / "mini_mbert.json").read_text())
    changed = json.loads(json.dumps(recorded))
    changed["whole"]["losses"][-1][1] += 1e-7
    assert changed != recorded
