// Drawing what the events change: the message log's rows and the call boxes (and which of them the page keeps), and
// the server's stderr lines. Events update S (state.js) at once; what they change is marked and drawn here once per
// animation frame, however many came meanwhile.
import { $, h } from "./dom.js";
import { api, errorText } from "./api.js";
import { S } from "./state.js";
import { closeView } from "./apps.js";

const MAX_LOG_ROWS = 2000;
const MAX_CALLS_SHOWN = 100; // finished calls whose box the page keeps (running ones are all shown: at most 32 run)

// ---------------------------------------------------------------------------------------------- message log

const logFilter = { text: "", dir: "", kind: "" };

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
  const button = h("button", { type: "button", class: "row", "aria-expanded": "false", title: e.dir === "out" ? "to the server" : "from the server",
    onclick: async () => {
      const open = button.getAttribute("aria-expanded") === "true";
      button.setAttribute("aria-expanded", open ? "false" : "true");
      detail.hidden = open;
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
  return h("li", { dataset: { seq: String(e.seq), dir: e.dir, kind: e.kind } }, button, detail);
}

// S.log holds up to twice MAX_LOG_ROWS entries (cut back to MAX_LOG_ROWS when it gets there: no O(n) shift per
// entry); the page shows the last MAX_LOG_ROWS. loggedSeq is the last entry drawn: a draw adds the rows after it.
let loggedSeq = 0;

export function addLog(e) {
  S.log.push(e);
  if (S.log.length >= 2 * MAX_LOG_ROWS) S.log = S.log.slice(-MAX_LOG_ROWS);
  dirty.log = true;
}

function logCount() {
  $("log-count").textContent = `${Math.min(S.log.length, MAX_LOG_ROWS)} messages`;
}

// The rows shown made the entries shown: a row the page has for an entry still shown stays (the same element, opened
// or not), the others go and the missing ones are made, in order. Both are in order of seq, so one walk pairs them:
// a resync read all 2,000 entries again and made 2,000 rows from them (0.6-1 s), nearly all of which it had.
export function renderLog() {
  const ol = $("log");
  const shown = S.log.slice(-MAX_LOG_ROWS);
  let row = ol.firstElementChild;
  let made = [];
  const place = () => {
    if (made.length) (row ? row.before(...made) : ol.append(...made));
    made = [];
  };
  for (const e of shown) {
    if (!logMatches(e)) continue;
    while (row && Number(row.dataset.seq) < e.seq) {
      const gone = row;
      row = row.nextElementSibling;
      gone.remove();
    }
    if (row && Number(row.dataset.seq) === e.seq) {
      place();
      row = row.nextElementSibling;
    } else made.push(logRow(e));
  }
  place();
  while (row) {
    const gone = row;
    row = row.nextElementSibling;
    gone.remove();
  }
  loggedSeq = shown.length ? shown[shown.length - 1].seq : 0;
  dirty.log = false;
  ol.scrollTop = ol.scrollHeight;
  logCount();
}

// The entries that came since the last draw, as one append (and one reading of the layout, for the scroll), however
// many they are: a row appended and the layout read for each entry cost a layout of the whole page per message.
function drawNewLog() {
  dirty.log = false;
  if ($("log-pause").checked) return; // (drawn whole when the pause ends)
  let from = S.log.length;
  while (from > 0 && S.log[from - 1].seq > loggedSeq && S.log.length - from < MAX_LOG_ROWS) from -= 1;
  const fresh = S.log.slice(from);
  if (!fresh.length) return;
  loggedSeq = fresh[fresh.length - 1].seq;
  const rows = fresh.filter(logMatches).map(logRow);
  if (rows.length) {
    const ol = $("log");
    const atBottom = ol.scrollTop + ol.clientHeight >= ol.scrollHeight - 30;
    if (rows.length >= MAX_LOG_ROWS) ol.replaceChildren(...rows);
    else {
      ol.append(...rows);
      for (let extra = ol.childElementCount - MAX_LOG_ROWS; extra > 0; extra -= 1) ol.firstElementChild.remove();
    }
    if (atBottom) ol.scrollTop = ol.scrollHeight;
  }
  logCount();
}

// ---------------------------------------------------------------------------------------------- once per frame

// What the frequent events change (the message log, calls, the stderr lines) is drawn once per animation frame,
// whatever number came meanwhile: a page that fell behind reads its backlog in chunks of thousands of events, and
// drew (and laid out) the page once for each. S is always current; `dirty` says what the page has yet to show. An
// event whose handling depends on what the page shows (a view's progress needs its call's box) has it drawn first.
const dirty = { log: false, calls: new Set(), stderr: false };
const DEFERRED = new Set(["log", "call", "serverlog", "stderr", "notification", "roots", "subscriptions", "extra"]);
const DRAW_LATEST_MS = 250; // a hidden page gets no animation frames
let drawPending = null;
let renderCall = null; // (app.js draws a call's box: drawCallsWith)

// How a call's box is drawn (app.js renderCall, given once at the start).
export function drawCallsWith(render) {
  renderCall = render;
}

// Before an event of `type` is handled: what the page has yet to show is drawn at the next frame, or now for an event
// whose handling depends on what the page shows.
export function drawFor(type) {
  if (DEFERRED.has(type)) scheduleDraw();
  else draw();
}

// The call `id` (in S.calls) is to be drawn again; the stderr lines (S.stderr) are.
export function markCall(id) {
  dirty.calls.add(id);
}

export function markStderr() {
  dirty.stderr = true;
}

function scheduleDraw() {
  if (dirty.calls.size >= MAX_CALLS_SHOWN) draw(); // (the pending work stays bounded, frames or none)
  else if (!drawPending) drawPending = { frame: requestAnimationFrame(draw), timer: setTimeout(draw, DRAW_LATEST_MS) };
}

export function draw() {
  if (drawPending) {
    cancelAnimationFrame(drawPending.frame);
    clearTimeout(drawPending.timer);
    drawPending = null;
  }
  if (dirty.log) drawNewLog();
  if (dirty.calls.size) {
    const ids = [...dirty.calls];
    dirty.calls.clear();
    for (const id of ids) if (S.calls.has(id)) renderCall(S.calls.get(id));
    dropOldCalls();
  }
  if (dirty.stderr) {
    dirty.stderr = false;
    if ($("stderr")) $("stderr").textContent = S.stderr.join("\n");
  }
  document.body.dataset.draws = String(Number(document.body.dataset.draws || 0) + 1);
}

export function dropCall(el, reason) {
  closeView(el.dataset.id, reason);
  S.calls.delete(el.dataset.id);
  dirty.calls.delete(el.dataset.id);
  el.remove();
}

// The page shows every running call and the last MAX_CALLS_SHOWN finished ones: the oldest finished box goes, with
// its view (a page that showed every call of a session grew without end, and so did each layout). Oldest by start,
// not by place: a state read again after a resync puts the calls the page had not shown on top.
export function dropOldCalls() {
  const finished = [...$("calls").children].filter((el) => el.dataset.status !== "running");
  if (finished.length <= MAX_CALLS_SHOWN) return;
  const started = (el) => (S.calls.get(el.dataset.id) || {}).started || 0;
  finished.sort((a, b) => started(b) - started(a));
  for (const el of finished.slice(MAX_CALLS_SHOWN)) dropCall(el, "the page shows only the last calls");
}
