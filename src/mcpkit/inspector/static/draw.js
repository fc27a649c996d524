// Drawing what the events change: the message log's new rows (log.js), the call boxes (and which of them the page
// keeps) and the server's stderr lines. Events update S (state.js) at once; what they change is marked and drawn
// here once per animation frame, however many came meanwhile.
import { $ } from "./dom.js";
import { S } from "./state.js";
import { closeView } from "./apps.js";
import { drawLog, logDirty } from "./log.js";

const MAX_CALLS_SHOWN = 100; // finished calls whose box the page keeps (running ones are all shown: at most 32 run)

// ---------------------------------------------------------------------------------------------- once per frame

// What the frequent events change (the message log, calls, the stderr lines) is drawn once per animation frame,
// whatever number came meanwhile: a page that fell behind reads its backlog in chunks of thousands of events, and
// drew (and laid out) the page once for each. S is always current; `dirty` says what the page has yet to show. An
// event whose handling depends on what the page shows (a view's progress needs its call's box) has it drawn first.
const dirty = { calls: new Set(), stderr: false };
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
  if (logDirty()) drawLog();
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
