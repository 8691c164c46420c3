"""Same numbers: each paper's training path, at tiny sizes on the CPU, gives the losses, metrics and weights
recorded in tests/fixtures/engine_equivalence/ (see tests/engine_equivalence.py for the runs and how to record
them). Single-threaded CPU float32 is deterministic on one machine, but its kernels are chosen by the CPU's
instruction set, so another CPU may differ in the last bits of a sum and training carries that on: on a CPU other
than the recorder's, the seven records differed by at most 1.5e-5 relative (the Dufter grid's dev perplexity, late
in its curve), the other six by at most 2.2e-7. So keys, lengths, types and integers compare exactly and floats to a
relative 1e-4. A moved loop that reorders a random draw or changes a mask moves the losses by far more; a change
that moves every number by less than 1e-4 (a slightly different weight decay over these few steps) is not caught.
Quantised metrics (accuracies, tags) compare exactly and could in principle flip on yet another CPU."""
import json
import os

import pytest

from .engine_equivalence import FIXTURES, RECORDERS, differences, finite

REL = 1e-4

RECORD = os.environ.get("XLREPRO_RECORD_EQUIVALENCE") == "1"


@pytest.mark.parametrize("path", sorted(RECORDERS))
def test_training_path_gives_the_recorded_numbers(path, tmp_path, multilingual_cache, lab):
    got = json.loads(json.dumps(RECORDERS[path](tmp_path)))  # tuples -> lists, as the fixture holds them
    assert finite(got)
    fixture = FIXTURES / f"{path}.json"
    if RECORD:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        fixture.write_text(json.dumps(got, indent=1) + "\n")
    assert differences(got, json.loads(fixture.read_text()), REL) == []


def test_the_comparison_would_catch_a_changed_number():
    recorded = json.loads((FIXTURES / "mini_mbert.json").read_text())
    assert differences(recorded, recorded, REL) == []
    changed = json.loads(json.dumps(recorded))
    changed["whole"]["losses"][-1][1] *= 1 + 1e-3  # a changed draw moves a loss by far more than this
    assert differences(changed, recorded, REL) == ["/whole/losses[5][1]: %r != %r" % (
        changed["whole"]["losses"][-1][1], recorded["whole"]["losses"][-1][1])]
    last_bits = json.loads(json.dumps(recorded))
    last_bits["whole"]["losses"][-1][1] *= 1 + 1e-7  # another CPU's rounding
    assert differences(last_bits, recorded, REL) == []


def test_the_comparison_is_exact_on_integers_keys_lengths_and_types():
    assert differences({"steps": 15}, {"steps": 15}, REL) == []
    assert differences({"steps": 16}, {"steps": 15}, REL) == ["/steps: 16 != 15"]
    assert differences({"steps": 15.001}, {"steps": 15}, REL) == ["/steps: 15.001 != 15"]  # no tolerance for an int
    assert differences({"ok": 1}, {"ok": True}, REL) == ["/ok: 1 != True"]
    assert differences({"x": 0.5}, {"x": None}, REL) == ["/x: 0.5 != None"]
    assert differences({"x": 0.5}, {"x": "0.5"}, REL) == ["/x: 0.5 != '0.5'"]
    assert differences({"a": 1}, {"b": 1}, REL) == ["/: keys ['a'] != ['b']"]
    assert differences({"a": [1]}, {"a": {"b": 1}}, REL) == ["/a: [1] != a record with keys ['b']"]
    assert differences({"x": [1, 2]}, {"x": [1, 2, 3]}, REL) == ["/x: [1, 2] != [1, 2, 3]"]
    assert differences([1], [1, 2], REL) == ["/: [1] != [1, 2]"]
    assert differences({"x": [[0.5, 2]]}, {"x": [[0.5, 3]]}, REL) == ["/x[0][1]: 2 != 3"]
    assert differences({"x": (0.5, 1.0)}, {"x": (0.5, 1.0 + 1e-9)}, REL) == []  # tuples as lists
    assert differences({"x": "ru"}, {"x": "es"}, REL) == ["/x: 'ru' != 'es'"]
    assert differences({"x": 0.0}, {"x": 1e-30}, REL) == ["/x: 0.0 != 1e-30"]  # no absolute slack
