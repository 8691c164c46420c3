"""Every built page, opened in a real browser (headless chromium): no broken image, every page in the navigation,
no raw traceback, no absolute machine path, nothing wider than the content column, no truncated table.

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


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, dict]:
    if not (HTML / "book" / "intro.html").is_file():
        pytest.skip("no built book in _build/html: run `make book` (or `make test-book`)")
    if CHROMIUM is None:
        pytest.skip("no chromium: apt-get install -y chromium")
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(HTML, site, dirs_exist_ok=True)
    script = f"<script>{CHECK_JS.read_text()}</script>"
    found = {}
    for rel in toc_pages():
        page = site / rel
        if not page.is_file():
            found[rel] = None
            continue
        checked = page.with_name(f"xl-check-{page.name}")
        checked.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
        dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                              f"--window-size={WINDOW}", "--virtual-time-budget=5000", "--dump-dom",
                              checked.as_uri()], capture_output=True, text=True, timeout=120).stdout
        hits = re.findall(r'<pre id="xl-book-check"[^>]*>(.*?)</pre>', dom, re.S)
        assert hits, f"{rel}: the check script did not run (chromium output: {dom[:300]!r})"
        found[rel] = json.loads(html.unescape(hits[-1]))
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
