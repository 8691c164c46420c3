// Injected into a copy of each built page by tests/test_book_browser.py; chromium --dump-dom returns the page
// with the findings appended as JSON in a pre element of id xl-book-check.
let xlChecked = false;
const xlCheck = () => {
  if (xlChecked) return;
  xlChecked = true;
  const out = {broken_images: [], wide: [], truncated_tables: [], nav: [], text: ""};
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
  out.nav = [...document.querySelectorAll(".bd-sidebar-primary nav a, nav.bd-docs-nav a")]
    .map((a) => a.getAttribute("href"));
  out.text = article.innerText;
  const pre = document.createElement("pre");
  pre.id = "xl-book-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
};
// on load, or after 3 s of (virtual) time where a remote resource never answers offline
window.addEventListener("load", () => setTimeout(xlCheck, 200));
setTimeout(xlCheck, 3000);
