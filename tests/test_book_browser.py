"""Every built page, opened in a real browser (headless chromium): no broken image, every page in the navigation,
no raw traceback, no absolute machine path, nothing wider than the content column, no truncated table, no Markdown
table markup shown as text, no table whose neighbouring cells' texts touch, no numbers written without a separator.

Runs on ``_build/html`` (``make book``; ``make test-book`` builds and runs this). Marked ``book`` and left out of
``make test``; it skips when the built book or chromium is absent (Debian: ``apt-get install -y chromium``).
No driver library: each page is copied with a small script (tests/book_check.js) appended, chromium's
``--dump-dom`` runs it after layout, and the script's findings come back as JSON in the dumped page.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urljoin

import pytest
import yaml

from .book_checks import glued_numbers, raw_table_markup

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
CHECK_JS = Path(__file__).with_name("book_check.js")
WINDOW = "1280,900"  # a laptop screen: the content column is about 700 px wide there
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                None)
# What an absolute machine path looks like in text: a home, work or temp folder, a site-packages, a Windows drive.
ABSOLUTE_PATH = re.compile(r"(?<![\w.])(/(home|root|work|tmp|Users|opt|mnt|scratch|private|var/folders)/[\w.-]+"
                           r"|[\w/.-]*site-packages/|[A-Z]:\\\\[\w])")
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w+Error: |^\w+Exception: ", re.M)


def toc_pages() -> list[str]:
    """The pages of _toc.yml, as paths of their HTML relative to _build/html (e.g. 'book/intro.html')."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    return [f"{f}.html" for f in files]


def check_page(page: Path) -> dict:
    """The findings of tests/book_check.js on `page`, opened in chromium (from a copy beside it, the script added)."""
    checked = page.with_name(f"xl-check-{page.name}")
    script = f"<script>{CHECK_JS.read_text()}</script>"
    checked.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                          f"--window-size={WINDOW}", "--virtual-time-budget=5000", "--dump-dom",
                          checked.as_uri()], capture_output=True, text=True, timeout=120).stdout
    hits = re.findall(r'<pre id="xl-book-check"[^>]*>(.*?)</pre>', dom, re.S)
    assert hits, f"{page.name}: the check script did not run (chromium output: {dom[:300]!r})"
    return json.loads(html.unescape(hits[-1]))


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, dict]:
    if not (HTML / "book" / "intro.html").is_file():
        pytest.skip("no built book in _build/html: run `make book` (or `make test-book`)")
    if CHROMIUM is None:
        pytest.skip("no chromium: apt-get install -y chromium")
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(HTML, site, dirs_exist_ok=True)
    found = {}
    for rel in toc_pages():
        page = site / rel
        found[rel] = check_page(page) if page.is_file() else None
    return found


def test_every_toc_page_was_built(pages):
    assert [rel for rel, r in pages.items() if r is None] == []


def test_no_broken_image(pages):
    assert {rel: r["broken_images"] for rel, r in pages.items() if r and r["broken_images"]} == {}


def test_every_page_is_in_the_navigation(pages):
    start = "book/intro.html"
    nav = {urljoin(start, h).split("#")[0] for h in pages[start]["nav"] if h and not h.startswith("http")}
    nav.add(start)
    assert [rel for rel in pages if rel not in nav] == []


def test_no_raw_traceback(pages):
    assert {rel: TRACEBACK.search(r["text"]).group(0) for rel, r in pages.items()
            if r and TRACEBACK.search(r["text"])} == {}


def test_no_absolute_machine_path(pages):
    assert {rel: sorted(set(m.group(0) for m in ABSOLUTE_PATH.finditer(r["text"])))
            for rel, r in pages.items() if r and ABSOLUTE_PATH.search(r["text"])} == {}


def test_nothing_wider_than_the_content_column(pages):
    wide = {rel: r["wide"] for rel, r in pages.items() if r and r["wide"]}
    assert not wide, "wider than the content column:\n" + json.dumps(wide, indent=1, ensure_ascii=False)


def test_no_truncated_table(pages):
    assert {rel: r["truncated_tables"] for rel, r in pages.items() if r and r["truncated_tables"]} == {}


def test_no_table_markup_shown_as_text(pages):
    raw = {rel: raw_table_markup(r["text"])[:3] for rel, r in pages.items() if r and raw_table_markup(r["text"])}
    assert not raw, "Markdown table markup shown as text:\n" + json.dumps(raw, indent=1, ensure_ascii=False)


def test_no_table_cells_run_together(pages):
    touching = {rel: r["touching_cells"] for rel, r in pages.items() if r and r["touching_cells"]}
    assert not touching, ("neighbouring cells whose texts touch (px between them):\n"
                          + json.dumps(touching, indent=1, ensure_ascii=False))


def test_no_numbers_without_a_separator(pages):
    glued = {rel: sorted({g for t in r["numeric_cells"] + [r["text"]] for g in glued_numbers(t)})
             for rel, r in pages.items() if r}
    glued = {rel: g for rel, g in glued.items() if g}
    assert not glued, "numbers written without a separator:\n" + json.dumps(glued, indent=1, ensure_ascii=False)


HAND_MADE = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
td, th {padding: 0} table.spaced td, table.spaced th {padding: 0.25rem 0.75rem}</style></head>
<body><article class="bd-article">
<p>| model | metric | |—|—| | 0 | µ |</p>
<table id="tight"><tr><th>en</th><th>es</th></tr><tr><td>89.2</td><td>47.5</td></tr></table>
<table id="spaced" class="spaced"><tr><th>en</th><th>es</th></tr><tr><td>89.2</td><td>47.5</td></tr></table>
<details><summary>more</summary><table id="hidden"><tr><td>1.600000</td><td>1.60e-03</td></tr></table></details>
<table id="glued"><tr><td>12541303923</td><td> 1.6000001.60e-03</td></tr></table>
</article></body></html>"""


def test_the_checks_find_hand_made_faults(tmp_path):
    if CHROMIUM is None:
        pytest.skip("no chromium: apt-get install -y chromium")
    page = tmp_path / "page.html"
    page.write_text(HAND_MADE, encoding="utf-8")
    found = check_page(page)
    assert raw_table_markup(found["text"]) == ["|—|—|"]
    # unpadded cells touch, in a collapsed block too; padded ones do not
    assert [t["what"].split()[0] for t in found["touching_cells"]] == ["#tight", "#hidden", "#glued"]
    assert found["touching_cells"][0]["cells"] == ["89.2", "47.5"] and found["touching_cells"][0]["gap"] < 4
    assert [g for t in found["numeric_cells"] for g in glued_numbers(t)] == ["1.6000001.60"]
