"""One progress line for long loops, in a terminal and in a notebook.

In a terminal: `tqdm.auto` (a plain tqdm bar), redrawn at most every `mininterval` seconds. In a notebook kernel
with ipywidgets: `tqdm.auto`'s widget, one line that updates. In a notebook kernel without a widget front end (papermill
executing a chapter): no bar at all, since every redraw would be saved as text (one long cell of bar lines), and
one summary line when the loop ends (``desc: n/total steps in 12.3 s (loss=2.861)``).
"""
from __future__ import annotations

import importlib.util
import sys
import time

from tqdm.auto import tqdm


def _in_kernel_without_widgets() -> bool:
    return "ipykernel" in sys.modules and importlib.util.find_spec("ipywidgets") is None


class SummaryLine:
    """The subset of tqdm's interface the loops use (update, set_postfix, close), printing one line on close."""

    def __init__(self, total: int, desc: str = "", initial: int = 0, disable: bool = False):
        self.total, self.desc, self.n, self.disable = total, desc, initial, disable
        self.initial, self.postfix, self.closed, self.started = initial, "", False, time.time()

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, **values) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def close(self) -> None:
        if self.closed or self.disable:
            self.closed = True
            return
        self.closed = True
        done = f"{self.n - self.initial} steps" + (f" (from {self.initial})" if self.initial else "")
        print(f"{self.desc}: {done}, {self.n}/{self.total} in {time.time() - self.started:.1f} s"
              + (f" ({self.postfix})" if self.postfix else ""), flush=True)


def progress(total: int, desc: str = "", initial: int = 0, disable: bool = False, mininterval: float = 2.0):
    """A progress bar over `total` steps (see the module's docstring for what it looks like where)."""
    if _in_kernel_without_widgets():
        return SummaryLine(total, desc, initial, disable)
    return tqdm(total=total, desc=desc, initial=initial, disable=disable, mininterval=mininterval)
