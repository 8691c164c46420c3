// Injected into a copy of each built page by tests/test_book_browser.py; chromium --dump-dom returns the page
// with the findings appended as JSON in a pre element of id xl-book-check.
let xlChecked = false;
const xlCheck = () => {
  if (xlChecked) return;
  xlChecked = true;
  const out = {broken_images: [], wide: [], truncated_tables: [], touching_cells: [], numeric_cells: [], nav: [],
               text: ""};
  const article = document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
  const col = article.getBoundingClientRect();
  const describe = (e) => (e.closest("[id]") ? "#" + e.closest("[id]").id + " " : "") +
    e.tagName.toLowerCase() + " " + (e.innerText || e.getAttribute("src") || "").slice(0, 60).replace(/\s+/g, " ");
  for (const img of document.querySelectorAll("img")) {
    if (!img.complete || img.naturalWidth === 0) out.broken_images.push(img.getAttribute("src"));
  }
  // A table fits when it lies inside the content column, or inside a box of its own that scrolls (class
  // xl-scroll: chosen for a table too wide to split) and itself fits the column.
  for (const el of article.querySelectorAll("table, img, svg")) {
    const box = el.tagName === "TABLE" && el.closest(".xl-scroll") ? el.closest(".xl-scroll") : el;
    const r = box.getBoundingClientRect();
    if (r.width > 0 && (r.right > col.right + 1 || r.left < col.left - 1)) {
      out.wide.push({what: describe(el), width: Math.round(r.width), column: Math.round(col.width)});
    }
  }
  // pandas' truncation: a header or body cell that is only "..." or "…"
  for (const t of article.querySelectorAll("table")) {
    if ([...t.querySelectorAll("th, td")].some((c) => /^(\.\.\.|…)$/.test(c.innerText.trim()))) {
      out.truncated_tables.push(describe(t));
    }
  }
  // Cells whose texts touch: neighbours in a row with less than MIN_GAP px between the end of one cell's text and
  // the start of the next one's read as one run of characters ("89.247.5" for 89.2 and 47.5). Measured on the
  // text itself (ranges over its text nodes), with every collapsed block opened; one finding per table.
  const MIN_GAP = 4;
  out.text = article.innerText;  // the text as a reader first sees it, collapsed blocks closed
  for (const d of article.querySelectorAll("details")) d.open = true;
  const textBox = (cell) => {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    let left = Infinity, right = -Infinity;
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (!n.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) {
        if (r.width > 0) { left = Math.min(left, r.left); right = Math.max(right, r.right); }
      }
    }
    return left < right ? {left, right} : null;
  };
  for (const t of article.querySelectorAll("table")) {
    let worst = null;
    for (const row of t.rows) {
      let prev = null, prevCell = null;
      for (const cell of row.cells) {
        const box = textBox(cell);
        if (!box) continue;
        if (prev) {
          const gap = box.left - prev.right;
          if (gap < MIN_GAP && (!worst || gap < worst.gap)) {
            worst = {gap: Math.round(gap * 10) / 10, cells: [prevCell.innerText.trim(), cell.innerText.trim()]};
          }
        }
        prev = box;
        prevCell = cell;
      }
    }
    if (worst) out.touching_cells.push({what: describe(t), ...worst});
  }
  // Cells whose own text holds digits, a point, digits, a point and a digit: the candidates for two numbers written
  // without a separator; the test tells them from version numbers and the like.
  for (const c of article.querySelectorAll("td, th")) {
    const text = c.innerText.trim();
    if (/\d\.\d+\.\d/.test(text)) out.numeric_cells.push(text.slice(0, 200));
  }
  out.nav = [...document.querySelectorAll(".bd-sidebar-primary nav a, nav.bd-docs-nav a")]
    .map((a) => a.getAttribute("href"));
  const pre = document.createElement("pre");
  pre.id = "xl-book-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
};
// on load, or after 3 s of (virtual) time where a remote resource never answers offline
window.addEventListener("load", () => setTimeout(xlCheck, 200));
setTimeout(xlCheck, 3000);
