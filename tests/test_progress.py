"""Progress output: a bar in a terminal, one summary line in a notebook kernel without widgets."""
import sys

from tqdm.auto import tqdm

from xlrepro import progress as progress_mod
from xlrepro.progress import SummaryLine, progress


def test_summary_line_prints_once_with_the_steps_done(capsys):
    bar = SummaryLine(total=10, desc="mini-mBERT", initial=4)
    for _ in range(6):
        bar.update(1)
    bar.set_postfix(loss="2.861")
    bar.close()
    bar.close()  # a second close (e.g. after a time limit) prints nothing more
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith("mini-mBERT: 6 steps (from 4), 10/10 in ") and out[0].endswith(" s (loss=2.861)")


def test_disabled_summary_line_prints_nothing(capsys):
    bar = SummaryLine(total=3, desc="x", disable=True)
    bar.update(3)
    bar.close()
    assert capsys.readouterr().out == ""


def test_kernel_without_widgets_gets_the_summary_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipykernel", object())
    monkeypatch.setattr(progress_mod.importlib.util, "find_spec", lambda name: None)
    assert isinstance(progress(5, "x"), SummaryLine)


def test_terminal_gets_a_throttled_tqdm(monkeypatch):
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    bar = progress(5, "x", mininterval=7.0)
    assert isinstance(bar, tqdm) and bar.mininterval == 7.0
    bar.close()
