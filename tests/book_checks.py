"""What the browser test (tests/test_book_browser.py) looks for in a page's visible text, as functions on strings:
Markdown table markup shown as text instead of a table, and two numbers written without a separator."""
from __future__ import annotations

import re

# A Markdown table's delimiter row, two cells or more: |---|---| or | :-- | --: |; Sphinx's smart quotes typeset
# "---" as an em dash, so |—|—| too. A rendered table shows no pipes, and prose has no such run.
_DELIMITER = re.compile(r"\|[ \t]*:?[-—–]+:?[ \t]*\|[ \t]*:?[-—–]+:?[ \t]*\|")
# A Markdown table row on a line of its own: | a | b |, two cells or more, each set off by spaces and closed by a pipe.
_ROW = re.compile(r"^[ \t]*\|(?:[ \t]+[^|\n]*[^|\s][ \t]+\|){2,}[ \t]*$", re.M)
# A run of digits and single points with two points or more: "89.247.5", "1.6000001.60", but also "2.13.0".
# An exponent may follow ("1.6000001.60e-03"); letters may not ("1.0.4.post1").
_DOTTED = re.compile(r"(?<![\w.])(\d+(?:\.\d+){2,})(?:[eE][-+]?\d+)?(?![\w.])")


def raw_table_markup(text: str) -> list[str]:
    """The pieces of `text` that are Markdown table markup left as text (a delimiter row or a row of cells)."""
    found = [m.group(0) for m in _DELIMITER.finditer(text)]
    found += [m.group(0).strip() for m in _ROW.finditer(text)]
    return list(dict.fromkeys(found))


def glued_numbers(text: str) -> list[str]:
    """Runs of `text` that read as decimal numbers written one after the other without a separator: digits and
    points with two points or more where a group between two points has three digits or more ("89.247.5" is 89.2
    and 47.5, "1.6000001.60" is 1.600000 and 1.60). Version and section numbers ("2.13.0", "3.2.1", "2026.11.26")
    have short inner groups and are not taken for glued numbers; neither are runs that go on with letters
    ("1.0.4.post1")."""
    out = []
    for m in _DOTTED.finditer(text):
        inner = m.group(1).split(".")[1:-1]
        if any(len(g) >= 3 for g in inner):
            out.append(m.group(1))
    return out
