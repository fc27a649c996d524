// The message log (the page's right column): the last MAX_LOG_ROWS entries, filtered, drawn as a window. Only the
// rows in view and MARGIN_ROWS on each side are elements; the list's padding above and below them gives the scroll
// bar the height of all. Every closed row has one height (measured again on a resize), so where an entry is, and which
// entries a scroll position shows, is arithmetic; a row the person opened is taller by what ResizeObserver measured. The
// layout of 2,000 grid rows held the page up to a second per resync; a window's is the same at any count.
// The keyboard: one row is in the tab order (a roving tabindex), the arrow keys move between the rows (scrolling the
// window), and the row that has focus keeps it by seq: scrolled out of the window its element goes, focus is parked
// on the scroll box (not dropped to the body) and given back to the row when it is drawn again.
import { $, h } from "./dom.js";
import { api, errorText } from "./api.js";
import { S } from "./state.js";

const MAX_LOG_ROWS = 2000;
const MARGIN_ROWS = 20; // rows drawn above and below the view (a scroll of a few rows shows rows already laid out)
const ROW_GUESS = 20; // px: a row's height until one is measured
const FOLLOW_PX = 30; // this close to the bottom, the list stays at the bottom as rows come

const logFilter = { text: "", dir: "", kind: "" };

// The entries shown: those of the last MAX_LOG_ROWS that match the filters, in order of seq. S.log holds up to twice
// MAX_LOG_ROWS entries (cut back to MAX_LOG_ROWS when it gets there: no O(n) shift per entry). loggedSeq is the last
// entry taken into `view`: a draw takes those after it.
let view = [];
let loggedSeq = 0;
let dirty = false;
let rowHeight = 0; // (0: not measured yet)
// The rows the person opened, by seq: kept (the same element, with what it showed) across resyncs, filters and while
// scrolled out of the window, until the log no longer shows their entry; `extra` is how much taller than a row.
const opened = new Map();
let following = true; // at the bottom: the list stays there as rows come (scrolled up, it stays on its rows)
let scrolledTo = 0; // where the page last scrolled the list (scrolled elsewhere since: by the person)
let pendingAt = null; // where the list was before a change measured after it (an opened row that grew)
let frame = 0;
let remeasure = false; // the list's box was resized (a zoom, a window resized): a row's height is measured again
let focusedSeq = 0; // the entry whose row has (or last had) focus in the log (0: none yet)
let tabRow = null; // the row button in the tab order (the focused entry's, when drawn)

// Show only the messages whose `key` (text, dir or kind) matches `value` (the log's filters).
export function filterLog(key, value) {
  logFilter[key] = value;
  renderLog();
}

function logMatches(e) {
  if (logFilter.dir && e.dir !== logFilter.dir) return false;
  if (logFilter.kind && e.kind !== logFilter.kind) return false;
  if (logFilter.text) {
    const t = logFilter.text.toLowerCase();
    return `${e.method || ""} ${e.id ?? ""} ${e.preview || ""}`.toLowerCase().includes(t);
  }
  return true;
}

function logRow(e) {
  const arrow = e.dir === "out" ? "→" : "←";
  const what = `${e.kind}${e.method ? " " + e.method : ""}${e.id !== null && e.id !== undefined ? " #" + e.id : ""}`;
  const ms = e.elapsed !== null && e.elapsed !== undefined ? `${(e.elapsed * 1000).toFixed(1)} ms` : `${e.size} B`;
  const detail = h("div", { hidden: true });
  const button = h("button", { type: "button", class: "row", tabindex: "-1", "aria-expanded": "false", title: e.dir === "out" ? "to the server" : "from the server",
    onclick: async () => {
      const open = button.getAttribute("aria-expanded") === "true";
      pendingAt = pendingAt || where();
      button.setAttribute("aria-expanded", open ? "false" : "true");
      detail.hidden = open;
      if (open) {
        opened.delete(e.seq);
        grown.unobserve(li);
        scheduleWindow();
      } else {
        opened.set(e.seq, { li, extra: 0 });
        grown.observe(li); // (it reports the height now and again when the message is shown)
      }
      if (!open && !detail.firstChild) {
        const r = await api("log-entry", { seq: e.seq });
        if (r.error) detail.append(h("p", { class: "err", text: errorText(r.error) }));
        else {
          let text = r.result.text;
          try {
            text = JSON.stringify(JSON.parse(text), null, 2);
          } catch (err) {
            /* kept as sent */
          }
          detail.append(h("pre", { text }), r.result.cut ? h("p", { class: "muted", text: `cut: the message was ${r.result.size} bytes` }) : null);
        }
      }
    } },
    h("span", { class: "muted", text: `${e.t.toFixed(3)}s` }),
    h("span", { class: `dir-${e.dir}`, text: arrow, "aria-label": e.dir === "out" ? "to the server" : "from the server" }),
    h("span", { class: `what k-${e.kind}`, text: what }),
    h("span", { class: "ms", text: ms }));
  const li = h("li", { dataset: { seq: String(e.seq), dir: e.dir, kind: e.kind } }, button, detail);
  return li;
}

export function addLog(e) {
  S.log.push(e);
  if (S.log.length >= 2 * MAX_LOG_ROWS) S.log = S.log.slice(-MAX_LOG_ROWS);
  dirty = true;
}

// Whether entries came that the log has yet to show (drawLog shows them).
export function logDirty() {
  return dirty;
}

function logCount() {
  $("log-count").textContent = `${Math.min(S.log.length, MAX_LOG_ROWS)} messages`;
}

// The whole log drawn again from S.log (a resync, the hello, a filter, the end of a pause, a clear): the list stays
// where it was (at the bottom, or at the entry that was at its top).
export function renderLog() {
  const at = where();
  const shown = S.log.slice(-MAX_LOG_ROWS);
  view = shown.filter(logMatches);
  loggedSeq = shown.length ? shown[shown.length - 1].seq : 0;
  dirty = false;
  forgetOpened(shown.length ? shown[0].seq : Infinity);
  drawWindow(at);
  logCount();
}

// The entries that came since the last draw (once per frame, however many).
export function drawLog() {
  dirty = false;
  if ($("log-pause").checked) return; // (drawn whole when the pause ends)
  let from = S.log.length;
  while (from > 0 && S.log[from - 1].seq > loggedSeq && S.log.length - from < MAX_LOG_ROWS) from -= 1;
  const fresh = S.log.slice(from);
  if (!fresh.length) return;
  const at = where();
  loggedSeq = fresh[fresh.length - 1].seq;
  if (fresh.length >= MAX_LOG_ROWS) view = fresh.filter(logMatches);
  else {
    for (const e of fresh) if (logMatches(e)) view.push(e);
    const oldest = S.log[Math.max(0, S.log.length - MAX_LOG_ROWS)].seq;
    let gone = 0;
    while (gone < view.length && view[gone].seq < oldest) gone += 1;
    if (gone) view.splice(0, gone);
  }
  forgetOpened(S.log[Math.max(0, S.log.length - MAX_LOG_ROWS)].seq);
  drawWindow(at);
  logCount();
}

function forgetOpened(oldest) {
  for (const [seq, o] of opened) {
    if (seq >= oldest && S.log.length) continue;
    grown.unobserve(o.li);
    opened.delete(seq);
  }
}

// ---------------------------------------------------------------------------------------------- the window

// Where each row is: index i of `view` starts at i rows plus the extra height of the opened rows before it. `marks`
// are the opened rows in `view`, by index (a few: the person opens them one at a time).
function rowPx() {
  return rowHeight || ROW_GUESS;
}

function firstAtLeast(seq) {
  let lo = 0;
  let hi = view.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (view[mid].seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function openedMarks() {
  const marks = [];
  for (const [seq, o] of opened) {
    const i = firstAtLeast(seq);
    if (i < view.length && view[i].seq === seq) marks.push({ i, extra: o.extra });
  }
  return marks.sort((a, b) => a.i - b.i);
}

function topOf(i, marks) {
  let y = i * rowPx();
  for (const m of marks) if (m.i < i) y += m.extra;
  return y;
}

// The index of the row at height y (the last one when y is past the end).
function indexAt(y, marks) {
  const px = rowPx();
  let before = 0;
  for (const m of marks) {
    const top = m.i * px + before;
    if (top > y) break;
    if (top + px + m.extra > y) return m.i;
    before += m.extra;
  }
  return Math.max(0, Math.min(view.length - 1, Math.floor((y - before) / px)));
}

// Where the list is, to keep it there across a change of `view` or of a row's height: at the bottom (it follows the
// rows that come), or the entry at its top and how far into it.
function where() {
  const box = $("log-scroll");
  const top = box.scrollTop;
  // Moved since the page scrolled it (by the person, or held in bounds by the browser), or all in view (cleared, or
  // a filter that shows a few): at the bottom, it follows.
  const bottom = box.scrollHeight - box.clientHeight - FOLLOW_PX;
  if (Math.abs(top - scrolledTo) >= 1 || bottom <= 0) following = top >= bottom;
  if (following) return { follow: true, top };
  const marks = openedMarks();
  const i = indexAt(top, marks);
  return { follow: false, top, seq: view.length ? view[i].seq : 0, into: top - topOf(i, marks) };
}

// The rows `at` shows made the list's elements (those it has stay: the same element, opened or not; the others go
// and the missing ones are made, in order: both are in order of seq, so one walk pairs them), its padding the rest.
function drawWindow(at) {
  const box = $("log-scroll");
  const ol = $("log");
  watch(box);
  pendingAt = null;
  const marks = openedMarks();
  const total = topOf(view.length, marks);
  const height = box.clientHeight;
  let top = total - height;
  if (!at.follow) {
    const i = firstAtLeast(at.seq);
    top = topOf(i, marks) + (i < view.length && view[i].seq === at.seq ? at.into : 0);
  }
  top = Math.max(0, Math.min(top, total - height));
  const first = Math.max(0, indexAt(top, marks) - MARGIN_ROWS);
  const end = Math.min(view.length, indexAt(top + height, marks) + 1 + MARGIN_ROWS);
  const hadFocus = ol.contains(document.activeElement);
  placeRows(ol, view.slice(first, end));
  ol.style.paddingTop = `${topOf(first, marks)}px`;
  ol.style.paddingBottom = `${total - topOf(end, marks)}px`;
  if (Math.abs(box.scrollTop - top) >= 1) box.scrollTop = top;
  scrolledTo = box.scrollTop;
  keepFocus(box, ol, hadFocus);
  if (!rowHeight && measureRow(ol)) drawWindow(at); // (the first rows drawn were placed by a guess)
}

function placeRows(ol, entries) {
  let row = ol.firstElementChild;
  let made = [];
  const place = () => {
    if (made.length) (row ? row.before(...made) : ol.append(...made));
    made = [];
  };
  for (const e of entries) {
    while (row && Number(row.dataset.seq) < e.seq) {
      const gone = row;
      row = row.nextElementSibling;
      gone.remove();
    }
    if (row && Number(row.dataset.seq) === e.seq) {
      place();
      row = row.nextElementSibling;
    } else made.push(opened.has(e.seq) ? opened.get(e.seq).li : logRow(e));
  }
  place();
  while (row) {
    const gone = row;
    row = row.nextElementSibling;
    gone.remove();
  }
}

// A closed row's height, measured (false: no closed row drawn, or the list is not laid out: hidden).
function measureRow(ol) {
  for (const li of ol.children) {
    if (opened.has(Number(li.dataset.seq))) continue;
    const px = li.getBoundingClientRect().height;
    if (px > 0) rowHeight = px;
    return px > 0;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------- focus

// After a draw: the focused entry's row, when drawn, is the one in the tab order (else the scroll box is, and the
// arrow keys go on from that entry); a focused row the draw removed parks focus on the box; a parked focus goes back
// to the row once it is drawn again.
function keepFocus(box, ol, hadFocus) {
  const row = focusedSeq ? rowOf(ol, focusedSeq) : null;
  const button = row ? row.querySelector(":scope > button.row") : null;
  inTabOrder(box, button);
  if (hadFocus && !ol.contains(document.activeElement)) box.focus({ preventScroll: true });
  if (button && document.activeElement === box) button.focus({ preventScroll: true });
}

// `button` (a row's, or null: then the scroll box) is the one place of the log in the tab order.
function inTabOrder(box, button) {
  if (tabRow !== button) {
    if (tabRow) tabRow.tabIndex = -1;
    if (button) button.tabIndex = 0;
    tabRow = button;
  }
  box.tabIndex = button ? -1 : 0;
}

// The row drawn for `seq` (rows are in order of seq: a binary search over the few drawn), or null.
function rowOf(ol, seq) {
  const rows = ol.children;
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const at = Number(rows[mid].dataset.seq);
    if (at === seq) return rows[mid];
    if (at < seq) lo = mid + 1;
    else hi = mid;
  }
  return null;
}

const KEY_STEPS = { ArrowDown: 1, ArrowUp: -1 };

// ArrowDown/ArrowUp, Home/End on a row or on the parked box: focus the next, previous, first or last entry shown,
// from the focused one (scrolled out of the window or not), scrolled into view.
function onKey(e) {
  if (!(e.key in KEY_STEPS) && e.key !== "Home" && e.key !== "End") return;
  if (e.target !== e.currentTarget && !(e.target.classList && e.target.classList.contains("row"))) return;
  if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || !view.length) return;
  e.preventDefault();
  const box = e.currentTarget;
  let i;
  if (e.key === "Home") i = 0;
  else if (e.key === "End") i = view.length - 1;
  else if (!focusedSeq) i = indexAt(box.scrollTop, openedMarks());
  else {
    const at = firstAtLeast(focusedSeq);
    const here = at < view.length && view[at].seq === focusedSeq;
    i = KEY_STEPS[e.key] > 0 ? (here ? at + 1 : at) : at - 1;
  }
  focusEntry(box, Math.max(0, Math.min(view.length - 1, i)));
}

function focusEntry(box, i) {
  const marks = openedMarks();
  const top = topOf(i, marks);
  const bottom = topOf(i + 1, marks);
  let to = box.scrollTop;
  if (top < to) to = top;
  else if (bottom > to + box.clientHeight) to = bottom - box.clientHeight;
  focusedSeq = view[i].seq;
  if (Math.abs(to - box.scrollTop) >= 1) box.scrollTop = to;
  drawWindow(where());
  const row = rowOf($("log"), focusedSeq);
  if (row) row.querySelector(":scope > button.row").focus({ preventScroll: true });
}

function onFocusIn(e) {
  const row = e.target.closest ? e.target.closest("#log > li") : null;
  if (!row) return;
  focusedSeq = Number(row.dataset.seq);
  inTabOrder(e.currentTarget, row.querySelector(":scope > button.row"));
}

// What changes the window without an entry coming: a scroll, the list's own size, an opened row's height. Drawn at
// the next frame, from where the list was before the change (unless the person scrolled it since).
// A resize of the box (a zoom, a window resized) measures a closed row again: where the list was is read with the
// old height, and drawn with the new one.
function scheduleWindow() {
  if (!frame) frame = requestAnimationFrame(() => {
    frame = 0;
    const moved = !pendingAt || Math.abs($("log-scroll").scrollTop - pendingAt.top) >= 1;
    const at = moved ? where() : pendingAt;
    if (remeasure) {
      remeasure = false;
      if (measureRow($("log"))) {
        for (const o of opened.values()) {
          if (o.li.isConnected) o.extra = Math.max(0, o.li.getBoundingClientRect().height - rowHeight);
        }
      }
    }
    drawWindow(at);
  });
}

function resized() {
  remeasure = true;
  scheduleWindow();
}

const grown = new ResizeObserver((changes) => {
  for (const change of changes) {
    const li = change.target;
    if (li.id === "log-scroll") {
      remeasure = true;
      continue;
    }
    const o = opened.get(Number(li.dataset.seq));
    if (!o || o.li !== li || !li.isConnected) continue; // (a row out of the window measures 0)
    const extra = Math.max(0, change.borderBoxSize[0].blockSize - rowPx());
    if (Math.abs(extra - o.extra) < 0.5) continue;
    pendingAt = pendingAt || where();
    o.extra = extra;
  }
  scheduleWindow();
});

let watching = false;

function watch(box) {
  if (watching) return;
  watching = true;
  box.addEventListener("scroll", scheduleWindow, { passive: true });
  box.addEventListener("keydown", onKey);
  box.addEventListener("focusin", onFocusIn);
  window.addEventListener("resize", resized, { passive: true }); // (a zoom that leaves the box's size as it was)
  grown.observe(box);
}
