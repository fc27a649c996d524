// The mcpkit inspector page. Talks to its own server only: POST /api/<action> (JSON) and GET /api/events (a
// stream of JSON events), both with the run's token. Every string from the MCP server is shown as text.
import { $, announce, clear, h, httpUrl, jsonView, openLink, segmentsView, urlView } from "./dom.js";
import { TOKEN, api, errorText } from "./api.js";
import { S, caps, connected } from "./state.js";
import { draw, drawCallsWith, drawFor, dropCall, dropOldCalls, markCall, markStderr } from "./draw.js";
import { addLog, filterLog, renderLog } from "./log.js";
import { buildForm, attachCompletion } from "./forms.js";
import { blocksView, contentsView, messagesView } from "./render.js";
import { closeViews, showCallView, viewProgress } from "./apps.js";

const MAX_SERVER_LINES = 500; // the server's log messages and stderr lines shown (as the inspector keeps its stderr)

function errorView(error) {
  const box = h("div", { class: "banner", role: "alert" }, h("strong", { text: "Error: " }), errorText(error));
  if (error && error.data !== undefined && error.data !== null) box.append(jsonView(error.data));
  if (error && error.stderr) box.append(h("div", { class: "kind", text: "server stderr" }), h("pre", { text: error.stderr }));
  return box;
}

// ---------------------------------------------------------------------------------------------- header

function renderHeader() {
  const st = S.state || {};
  const dot = $("status-dot");
  dot.className = `dot ${st.status || ""}`;
  const words = { connected: "connected", connecting: "connecting…", disconnected: "disconnected", failed: "failed to connect", unreachable: "not answering: retrying…" };
  $("status-text").textContent = words[st.status] || st.status || "";
  const info = st.serverInfo || {};
  $("server-name").textContent = st.serverInfo ? `${info.title || info.name || "?"} ${info.version || ""}`.trim() : st.target || "";
  $("server-name").title = st.target || "";
  $("era").textContent = st.protocolVersion ? `${st.era === "modern" ? "stateless" : "handshake"} · ${st.protocolVersion}` : "";
  $("mode").value = st.mode || "auto";
  $("pin").value = st.pinnedVersion || "";
  const banner = $("banner");
  clear(banner);
  if (st.error && st.status !== "connected") {
    banner.hidden = false;
    const lead = { failed: "Could not connect: ", unreachable: "The server is not answering: " }[st.status] || "Connection ended: ";
    banner.append(h("strong", { text: lead }), errorText(st.error));
    if (st.error.stderr) banner.append(h("pre", { text: st.error.stderr }));
  } else banner.hidden = true;
  renderDev();
}

function renderDev() {
  const dev = (S.state && S.state.extra && S.state.extra.dev) || null;
  const box = $("dev");
  clear(box);
  if (!dev) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  box.className = dev.error ? "dev failed" : "dev";
  box.append(h("strong", { text: "mcpkit dev: " }), `watching ${dev.watching || ""}`);
  if (dev.reloads) box.append(` · reloaded ${dev.reloads} time${dev.reloads === 1 ? "" : "s"}`);
  if (dev.lastReload) box.append(` · last at ${new Date(dev.lastReload * 1000).toLocaleTimeString()}`);
  if (dev.error) box.append(h("div", { text: "The last change did not load; the previous server still runs:" }), h("pre", { class: "dev-error", text: dev.error }));
}

// ---------------------------------------------------------------------------------------------- lists

const LIST_UI = {
  tools: { list: "tools-list", pager: "tools-pager", cap: "tools" },
  resources: { list: "resources-list", pager: "resources-pager", cap: "resources" },
  templates: { list: "templates-list", pager: "templates-pager", cap: "resources" },
  prompts: { list: "prompts-list", pager: "prompts-pager", cap: "prompts" },
};

async function loadList(kind, { next = false, all = false } = {}) {
  const ui = LIST_UI[kind];
  if (!connected()) return;
  if (!(ui.cap in caps())) {
    S.lists[kind] = [];
    S.cursors[kind] = null;
    renderList(kind, `the server offers no ${ui.cap}`);
    return;
  }
  let cursor = next ? S.cursors[kind] : null;
  if (!next) S.pages[kind] = 0;
  let items = [];
  for (let i = 0; i < (all ? 100 : 1); i += 1) {
    const r = await api("list", { kind, cursor });
    if (r.error) {
      renderList(kind, errorText(r.error));
      return;
    }
    if (r.result.unsupported) {
      renderList(kind, r.result.unsupported);
      return;
    }
    items = items.concat(r.result.items);
    S.pages[kind] += 1;
    cursor = r.result.nextCursor;
    if (!cursor) break;
  }
  S.lists[kind] = items;
  S.cursors[kind] = cursor || null;
  renderList(kind);
  if (kind === "tools" && S.selected.tool) {
    const again = items.find((t) => t.name === S.selected.tool.name);
    if (again && JSON.stringify(again) !== JSON.stringify(S.selected.tool)) {
      S.selected.tool = again;
      renderTool();
    }
  }
}

function itemLabel(kind, item) {
  const d = item._display || {};
  if (kind === "resources") return [d.name || item.name, item.uri];
  if (kind === "templates") return [d.name || item.name, item.uriTemplate];
  const desc = (d.description || []).map((p) => p[1]).join("");
  return [d.name || item.name, d.name && d.name !== item.name ? `${item.name}${desc ? " · " + desc : ""}` : desc];
}

function renderList(kind, note) {
  const ui = LIST_UI[kind];
  const ul = clear($(ui.list));
  const key = kind === "resources" ? "uri" : kind === "templates" ? "uriTemplate" : "name";
  const sel = { tools: "tool", resources: "resource", templates: "template", prompts: "prompt" }[kind];
  for (const item of S.lists[kind]) {
    const [name, sub] = itemLabel(kind, item);
    const current = S.selected[sel] && S.selected[sel][key] === item[key];
    const b = h("button", { type: "button", "aria-current": current ? "true" : "false", dataset: { key: String(item[key]) },
      onclick: () => select(kind, item) }, h("span", { class: "name", text: name }), sub ? h("span", { class: "sub", text: sub }) : null);
    if (kind === "resources" && S.updated.has(item.uri)) b.append(h("span", { class: "badge warn", text: "updated" }));
    ul.append(h("li", {}, b));
  }
  const pager = clear($(ui.pager));
  if (note) pager.append(h("span", { class: "muted", text: note }));
  else pager.append(h("span", { class: "muted", text: `${S.lists[kind].length} shown · page ${S.pages[kind]}` }));
  if (S.cursors[kind]) {
    pager.append(
      h("button", { type: "button", class: "secondary", text: "Next page", onclick: () => loadList(kind, { next: true }) }),
      h("button", { type: "button", class: "secondary", text: "All pages", onclick: () => loadList(kind, { all: true }) }),
    );
  }
}

function select(kind, item) {
  if (kind === "tools") {
    S.selected.tool = item;
    renderList("tools");
    renderTool();
  } else if (kind === "resources") {
    S.selected.resource = item;
    S.selected.template = null;
    renderList("resources");
    renderList("templates");
    readResource(item.uri, item);
  } else if (kind === "templates") {
    S.selected.template = item;
    S.selected.resource = null;
    renderList("templates");
    renderList("resources");
    renderTemplate();
  } else {
    S.selected.prompt = item;
    renderList("prompts");
    renderPrompt();
  }
}

function reloadAll() {
  loadList("tools");
  loadList("resources");
  loadList("templates");
  loadList("prompts");
  if ("tasks" in caps()) loadTasks();
}

// ---------------------------------------------------------------------------------------------- tools

function annotationBadges(tool) {
  const a = tool.annotations || {};
  const out = h("div", { class: "annotations" });
  const marks = [["readOnlyHint", "read-only"], ["destructiveHint", "destructive"], ["idempotentHint", "idempotent"], ["openWorldHint", "open world"]];
  for (const [key, label] of marks) if (a[key] !== undefined) out.append(h("span", { class: `badge ${a[key] ? "" : "muted"}`, text: a[key] ? label : `not ${label}` }));
  const task = tool.execution && tool.execution.taskSupport;
  if (task) out.append(h("span", { class: "badge", text: `tasks: ${task}` }));
  if (tool.outputSchema) out.append(h("span", { class: "badge ok", text: "structured output" }));
  const ui = (tool._meta && typeof tool._meta.ui === "object" && tool._meta.ui) || {};
  if (typeof ui.resourceUri === "string" || (tool._meta && typeof tool._meta["ui/resourceUri"] === "string")) out.append(h("span", { class: "badge", text: "MCP Apps view" }));
  if (Array.isArray(ui.visibility) && !ui.visibility.includes("model")) out.append(h("span", { class: "badge", text: "app only: a host does not offer it to the model" }));
  return out;
}

function renderTool() {
  const tool = S.selected.tool;
  const box = clear($("tool-detail"));
  if (!tool) return;
  const d = tool._display || {};
  box.append(h("h2", { text: d.name || tool.name }));
  if (d.name && d.name !== tool.name) box.append(h("p", { class: "muted" }, "name: ", h("code", { text: tool.name })));
  if (d.description && d.description.length) box.append(segmentsView(d.description));
  box.append(annotationBadges(tool));
  const form = buildForm(tool.inputSchema || {});
  const raw = h("textarea", { id: "raw-args", rows: "6", spellcheck: "false", hidden: true });
  const rawLabel = h("label", { class: "check" }, h("input", { type: "checkbox", id: "raw-toggle", onchange: (e) => {
    raw.hidden = !e.target.checked;
    form.el.hidden = e.target.checked;
    if (e.target.checked) {
      const v = form.value();
      raw.value = JSON.stringify(v.ok ? v.value : {}, null, 2);
    }
  } }), "Edit the arguments as JSON");
  const status = h("div", { class: "err", "aria-live": "polite" });
  const support = (tool.execution && tool.execution.taskSupport) || null;
  const taskExtension = S.state && S.state.era === "modern" && "io.modelcontextprotocol/tasks" in (caps().extensions || {});
  const asTask = h("input", { type: "checkbox", id: "task-toggle", checked: support === "required", disabled: support === "required" });
  const taskLabel = support === "optional" || support === "required" || taskExtension
    ? h("label", { class: "check" }, asTask, support === "required" ? "Runs as a task (required)" : "Run as a task")
    : null;
  const f = h("form", { class: "schema", id: "tool-form", novalidate: true, "aria-label": `Arguments of ${tool.name}`, onsubmit: async (e) => {
    e.preventDefault();
    let args;
    if (!raw.hidden) {
      try {
        args = JSON.parse(raw.value || "{}");
      } catch (err) {
        status.textContent = `not valid JSON: ${err.message}`;
        return;
      }
    } else {
      const v = form.value();
      if (!v.ok) {
        status.textContent = v.error;
        return;
      }
      args = v.value;
    }
    status.textContent = "";
    const r = await api("call", { name: tool.name, arguments: args, task: !!(taskLabel && asTask.checked) });
    if (r.error) status.textContent = errorText(r.error);
  } }, form.el, raw, h("div", { class: "actions" }, h("button", { type: "submit", id: "call-button", text: `Call ${tool.name}` }), taskLabel, rawLabel), status);
  f.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      f.requestSubmit();
    }
  });
  box.append(f, h("p", { class: "hint", text: "Ctrl+Enter calls the tool from any field." }));
  const schemas = h("details", {}, h("summary", { text: "Schemas" }), h("div", { class: "kind", text: "inputSchema" }), jsonView(tool.inputSchema || {}));
  if (tool.outputSchema) schemas.append(h("div", { class: "kind", text: "outputSchema" }), jsonView(tool.outputSchema));
  box.append(schemas);
}

// What each call box shows, by box (the call drawn, or the newest equal to it: no copy beside S.calls): a state read
// again (a resync) redraws only the calls that changed; it redrew all (up to MAX_CALLS_SHOWN, draw.js), the page's
// longest work. (Weak: a box dropped is forgotten.)
const drawnAs = new WeakMap();

// Whether two values parsed from JSON are equal (objects by their keys, whatever their order).
function sameJson(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) if (!Object.hasOwn(b, key) || !sameJson(a[key], b[key])) return false;
  return true;
}

// A call's box: its head and its content are drawn again on each event; its MCP Apps view (apps.js) lives in a
// slot between them that is never cleared (a frame that leaves the document reloads). A call as its box shows it
// already is not drawn again.
function renderCall(call) {
  S.calls.set(call.id, call);
  let outer = document.querySelector(`.call[data-id="${CSS.escape(call.id)}"]`);
  if (outer && sameJson(drawnAs.get(outer), call)) {
    drawnAs.set(outer, call);
    return;
  }
  const fresh = !outer;
  if (fresh) outer = h("div", { class: "call", dataset: { id: call.id } }, h("div", { class: "call-top" }), h("div", { class: "call-view" }), h("div", { class: "call-rest" }));
  const box = outer.querySelector(".call-top");
  const rest = clear(outer.querySelector(".call-rest"));
  const result = call.result || null;
  const state = { running: "running", done: result && result.isError ? "the tool reported an error" : "done", failed: "failed", cancelled: "cancelled" }[call.status] || call.status;
  // A running call's progress and task state are redrawn below its head, which stays the same element: a Cancel
  // button replaced at every progress event could lose the click a person was making on it.
  const head = box.querySelector(":scope > .call-head");
  if (head && call.status === "running" && outer.dataset.status === "running") {
    for (const el of [...box.children]) if (el !== head) el.remove();
  } else {
    clear(box);
    const title = h("div", { class: "call-head" }, h("strong", { text: call.name }), h("span", { class: "muted mono", text: JSON.stringify(call.arguments).slice(0, 200) }));
    title.append(h("span", { class: `badge ${call.status === "done" && !(result && result.isError) ? "ok" : call.status === "running" ? "" : "bad"}`, text: state }));
    if (call.status === "running") {
      title.append(h("button", { type: "button", class: "danger", text: "Cancel", "aria-label": `Cancel the call of ${call.name}`, onclick: () => api("cancel", { id: call.id }) }));
    }
    box.append(title);
  }
  outer.className = `call ${call.status}${result && result.isError ? " iserror" : ""}`;
  outer.dataset.status = call.status;
  if (call.taskState) {
    const t = call.taskState;
    box.append(h("div", { class: "task-state" }, "task ", h("code", { text: String(t.taskId) }), " · ",
      h("span", { class: `badge ${t.status === "completed" ? "ok" : t.status === "failed" || t.status === "cancelled" ? "bad" : ""}`, text: String(t.status) }),
      t.statusMessage ? ` · ${t.statusMessage}` : ""));
  } else if (call.asTask && call.status === "running") box.append(h("div", { class: "task-state muted", text: "starting as a task…" }));
  if (call.status === "running") {
    const p = call.progress;
    const bar = h("progress", { "aria-label": `progress of ${call.name}` });
    if (p && typeof p.total === "number" && p.total > 0) {
      bar.max = p.total;
      bar.value = Math.min(p.progress, p.total);
    } else if (p && typeof p.progress === "number") {
      bar.removeAttribute("value");
    }
    box.append(bar);
    if (p) box.append(h("div", { class: "progress-text", text: `${p.progress}${typeof p.total === "number" ? " of " + p.total : ""}${p.message ? " · " + p.message : ""}` }));
  }
  showCallView(call, outer.querySelector(".call-view"), api);
  if (result) {
    rest.append(blocksView(result.content, { read: (uri) => openResource(uri) }));
    if (result.structuredContent !== undefined) {
      const v = call.validation || {};
      rest.append(h("div", { class: "structured-head" }, h("span", { class: "kind", text: "structured content" }), " ",
        h("span", { class: `badge validation ${v.state === "valid" ? "ok" : v.state === "invalid" ? "bad" : ""}`, text: v.message || "" })), jsonView(result.structuredContent));
    } else if (call.validation && call.validation.state === "invalid") {
      rest.append(h("div", { class: "badge bad", text: call.validation.message }));
    }
  }
  if (call.error) rest.append(errorView(call.error));
  if (call.status !== "running" && call.ended) rest.append(h("div", { class: "muted", text: `${((call.ended - call.started) * 1000).toFixed(0)} ms` }));
  if (fresh) $("calls").prepend(outer);
  drawnAs.set(outer, call);
  if (call.status !== "running") announce(`${call.name}: ${state}`);
}

// ---------------------------------------------------------------------------------------------- resources

async function openResource(uri) {
  activateTab("tab-resources");
  readResource(uri, null);
}

async function readResource(uri, item) {
  const box = clear($("resource-detail"));
  const d = (item && item._display) || {};
  box.append(h("h2", { text: d.name || uri }), h("p", {}, h("code", { text: uri })));
  if (item && d.description && d.description.length) box.append(segmentsView(d.description));
  const actions = h("div", { class: "actions" }, h("button", { type: "button", class: "secondary", text: "Read again", onclick: () => readResource(uri, item) }));
  const canSub = (caps().resources || {}).subscribe;
  const subscribed = ((S.state && S.state.subscriptions) || []).includes(uri);
  if (canSub) {
    actions.append(h("button", { type: "button", class: "secondary", id: "subscribe-button", "aria-pressed": subscribed ? "true" : "false",
      text: subscribed ? "Unsubscribe" : "Subscribe to updates",
      onclick: async () => {
        const r = await api(subscribed ? "unsubscribe" : "subscribe", { uri });
        if (r.error) box.append(errorView(r.error));
        else {
          const subs = new Set((S.state && S.state.subscriptions) || []);
          if (subscribed) subs.delete(uri);
          else subs.add(uri);
          S.state.subscriptions = [...subs];
          readResource(uri, item);
        }
      } }));
  }
  box.append(actions);
  if (S.updated.has(uri)) box.append(h("p", { class: "badge warn", text: `updated at ${S.updated.get(uri)}` }));
  const r = await api("read", { uri });
  if (r.error) {
    box.append(errorView(r.error));
    return;
  }
  const contents = r.result.contents || [];
  box.append(h("div", { class: "contents", id: "resource-contents" }, contents.map((c) => contentsView(c))));
  if (!contents.length) box.append(h("p", { class: "muted", text: "(no contents)" }));
}

function templateVariables(template) {
  const names = [];
  for (const m of String(template).matchAll(/\{([+#./;?&]?)([^}]+)\}/g)) {
    for (const part of m[2].split(",")) {
      const name = part.replace(/[*]$/, "").replace(/:\d+$/, "").trim();
      if (name && !names.some((n) => n.name === name)) names.push({ name, op: m[1] });
    }
  }
  return names;
}

function expandTemplate(template, values) {
  return String(template).replace(/\{([+#./;?&]?)([^}]+)\}/g, (all, op, body) => {
    const parts = body.split(",").map((p) => p.replace(/[*]$/, "").replace(/:\d+$/, "").trim());
    const enc = (v) => (op === "+" || op === "#" ? encodeURI(v) : encodeURIComponent(v));
    const present = parts.filter((p) => values[p] !== undefined && values[p] !== "");
    if (!present.length) return "";
    if (op === "?" || op === "&") return (op === "?" ? "?" : "&") + present.map((p) => `${p}=${enc(values[p])}`).join("&");
    const sep = { "": ",", "+": ",", "#": ",", ".": ".", "/": "/", ";": ";" }[op] ?? ",";
    const prefix = { "#": "#", ".": ".", "/": "/", ";": ";" }[op] ?? "";
    return prefix + present.map((p) => (op === ";" ? `${p}=${enc(values[p])}` : enc(values[p]))).join(sep);
  });
}

function renderTemplate() {
  const t = S.selected.template;
  const box = clear($("resource-detail"));
  if (!t) return;
  const d = t._display || {};
  box.append(h("h2", { text: d.name || t.name }), h("p", {}, h("code", { text: t.uriTemplate })));
  if (d.description && d.description.length) box.append(segmentsView(d.description));
  const vars = templateVariables(t.uriTemplate);
  const inputs = {};
  const fields = h("div", { class: "fields" });
  for (const v of vars) {
    const id = `tpl-${v.name}`;
    const input = h("input", { id, name: v.name, type: "text", autocomplete: "off" });
    const dl = attachCompletion(input, (name, value) => complete({ type: "ref/resource", uri: t.uriTemplate }, name, value, inputs), v.name);
    inputs[v.name] = input;
    fields.append(h("div", { class: "field" }, h("label", { for: id, text: v.name }), input, dl));
  }
  const preview = h("p", { class: "muted mono" });
  const update = () => {
    const values = Object.fromEntries(Object.entries(inputs).map(([k, i]) => [k, i.value]));
    preview.textContent = expandTemplate(t.uriTemplate, values);
  };
  Object.values(inputs).forEach((i) => i.addEventListener("input", update));
  update();
  const out = h("div", {});
  box.append(h("form", { class: "schema", id: "template-form", onsubmit: (e) => {
    e.preventDefault();
    update();
    clear(out);
    readInto(preview.textContent, out);
  } }, fields, preview, h("div", { class: "actions" }, h("button", { type: "submit", text: "Read" }))), out);
}

async function readInto(uri, out) {
  const r = await api("read", { uri });
  if (r.error) out.append(errorView(r.error));
  else out.append(h("div", { class: "contents" }, (r.result.contents || []).map((c) => contentsView(c))));
}

async function complete(ref, name, value, inputs) {
  if (!(S.state && S.state.completions)) return []; // (declared, or a 2024-11-05 server not yet known not to)
  const context = {};
  for (const [k, i] of Object.entries(inputs || {})) if (k !== name && i.value) context[k] = i.value;
  const r = await api("complete", { ref, argument: name, value, context });
  return r.error ? [] : r.result.values;
}

// ---------------------------------------------------------------------------------------------- prompts

function renderPrompt() {
  const p = S.selected.prompt;
  const box = clear($("prompt-detail"));
  if (!p) return;
  const d = p._display || {};
  box.append(h("h2", { text: d.name || p.name }));
  if (d.description && d.description.length) box.append(segmentsView(d.description));
  const inputs = {};
  const fields = h("div", { class: "fields" });
  for (const arg of p.arguments || []) {
    const id = `prompt-arg-${arg.name}`;
    const input = h("input", { id, name: arg.name, type: "text", required: !!arg.required, autocomplete: "off" });
    const dl = attachCompletion(input, (name, value) => complete({ type: "ref/prompt", name: p.name }, name, value, inputs), arg.name);
    inputs[arg.name] = input;
    fields.append(h("div", { class: "field" }, h("label", { for: id, text: `${arg.title || arg.name}${arg.required ? " *" : ""}` }), input, dl, arg.description ? h("div", { class: "help", text: arg.description }) : null));
  }
  if (!(p.arguments || []).length) fields.append(h("p", { class: "hint", text: "No arguments." }));
  const out = h("div", { id: "prompt-result" });
  box.append(h("form", { class: "schema", id: "prompt-form", onsubmit: async (e) => {
    e.preventDefault();
    const args = {};
    for (const [k, i] of Object.entries(inputs)) if (i.value !== "") args[k] = i.value;
    clear(out);
    const r = await api("prompt", { name: p.name, arguments: args });
    if (r.error) {
      out.append(errorView(r.error));
      return;
    }
    if (r.result._display && r.result._display.description) out.append(segmentsView(r.result._display.description));
    out.append(messagesView(r.result.messages, { read: (uri) => openResource(uri) }));
  } }, fields, h("div", { class: "actions" }, h("button", { type: "submit", text: "Get prompt" }))), out);
}

// ---------------------------------------------------------------------------------------------- tasks

async function loadTasks() {
  const box = clear($("tasks"));
  if (!connected()) return;
  if (!("tasks" in caps())) {
    const modern = "io.modelcontextprotocol/tasks" in (caps().extensions || {});
    box.append(h("p", { class: "hint", text: modern
      ? "The server offers tasks (2026-07-28 extension), which has no list of tasks: a tool called with “Run as a task” shows its task's status in its call."
      : "The server declares no tasks capability." }));
    return;
  }
  const r = await api("tasks", { op: "list" });
  if (r.error) {
    box.append(errorView(r.error));
    return;
  }
  const tasks = r.result.tasks || [];
  if (!tasks.length) box.append(h("p", { class: "hint", text: "No tasks." }));
  const table = h("table", { class: "kv" }, h("tr", {}, ["task", "status", "message", "created", ""].map((c) => h("th", { text: c }))));
  for (const t of tasks) {
    table.append(h("tr", {},
      h("td", {}, h("code", { text: t.taskId })),
      h("td", {}, h("span", { class: `badge ${t.status === "completed" ? "ok" : t.status === "failed" || t.status === "cancelled" ? "bad" : ""}`, text: t.status })),
      h("td", { text: t.statusMessage || "" }),
      h("td", { text: t.createdAt || "" }),
      h("td", {}, t.status === "working" || t.status === "input_required"
        ? h("button", { type: "button", class: "danger", text: "Cancel", onclick: async () => { await api("tasks", { op: "cancel", taskId: t.taskId }); loadTasks(); } })
        : null)));
  }
  box.append(table);
}

// ---------------------------------------------------------------------------------------------- roots

function renderRoots() {
  const box = clear($("roots"));
  const rows = h("div", { id: "roots-rows" });
  const addRow = (root) => {
    const n = rows.children.length + 1;
    const uri = h("input", { type: "text", id: `root-uri-${n}`, value: root.uri || "", placeholder: "file:///path/to/folder", class: "root-uri" });
    const name = h("input", { type: "text", id: `root-name-${n}`, value: root.name || "", class: "root-name" });
    const row = h("div", { class: "roots-row" },
      h("div", { class: "field" }, h("label", { for: uri.id, text: `Root ${n} URI` }), uri),
      h("div", { class: "field" }, h("label", { for: name.id, text: "Name" }), name),
      h("button", { type: "button", class: "secondary", text: "Remove", "aria-label": `Remove root ${n}`, onclick: () => row.remove() }));
    rows.append(row);
  };
  for (const root of (S.state && S.state.roots) || []) addRow(root);
  const status = h("div", { "aria-live": "polite" });
  box.append(rows, h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", text: "Add a root", onclick: () => addRow({}) }),
    h("button", { type: "button", id: "roots-save", text: "Save roots", onclick: async () => {
      const roots = [...rows.querySelectorAll(".roots-row")].map((r) => ({ uri: r.querySelector(".root-uri").value.trim(), name: r.querySelector(".root-name").value.trim() })).filter((r) => r.uri);
      const res = await api("roots", { roots });
      status.textContent = res.error ? errorText(res.error) : `saved ${roots.length} root${roots.length === 1 ? "" : "s"}`;
    } })), status);
}

// ---------------------------------------------------------------------------------------------- server

function renderServer() {
  const st = S.state || {};
  const box = clear($("server-info"));
  const info = st.serverInfo || {};
  box.append(h("h2", { text: "Server" }));
  const table = h("table", { class: "kv" });
  const row = (k, v) => table.append(h("tr", {}, h("th", { text: k }), h("td", {}, v)));
  row("target", h("code", { text: st.target || "" }));
  row("status", st.status || "");
  if (st.serverInfo) {
    row("name", info.name || "");
    if (info.title) row("title", info.title);
    row("version", info.version || "");
    if (info.description) row("description", info.description);
    if (info.websiteUrl) {
      const link = httpUrl(info.websiteUrl);
      row("website", h("span", {}, h("code", { text: String(info.websiteUrl) }), " ", link ? h("button", { type: "button", class: "secondary", text: "Open", onclick: () => openLink(info.websiteUrl) }) : h("span", { class: "muted", text: "(not an http(s) link)" })));
    }
  }
  if (st.protocolVersion) row("protocol", `${st.protocolVersion} (${st.era === "modern" ? "stateless era" : "handshake era"})`);
  box.append(table);
  if (st.instructions) box.append(h("h3", { text: "Instructions" }), h("pre", { text: st.instructions }));
  if (st.capabilities) box.append(h("h3", { text: "Capabilities" }), jsonView(st.capabilities, "server capabilities"));
  const level = h("select", { id: "log-level" }, ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"].map((l) => h("option", { text: l })));
  level.value = st.logLevel || "info";
  const pingOut = h("span", { class: "muted", "aria-live": "polite" });
  box.append(h("h3", { text: "Try" }), h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", text: "Ping", onclick: async () => {
      const r = await api("ping");
      pingOut.textContent = r.error ? errorText(r.error) : `answered in ${(r.result.seconds * 1000).toFixed(1)} ms`;
    } }), pingOut,
    "logging" in (st.capabilities || {}) ? [h("label", { for: "log-level", text: "Server log level" }), level,
      h("button", { type: "button", class: "secondary", text: "Set", onclick: () => api("log-level", { level: level.value }) })] : null));
  box.append(h("h3", { text: "Server log messages" }));
  const logs = h("ol", { class: "log-rows", id: "server-log" });
  for (const p of S.serverLog) logs.append(serverLogRow(p));
  box.append(logs);
  box.append(h("h3", { text: "Server stderr" }), h("pre", { id: "stderr", text: S.stderr.join("\n") || "(nothing)" }));
}

function serverLogRow(p) {
  return h("li", {}, h("span", { class: "badge", text: String(p.level || "") }), " ", p.logger ? h("code", { text: String(p.logger) }) : null, " ",
    typeof p.data === "string" ? p.data : JSON.stringify(p.data),
    p.cut ? h("span", { class: "muted", text: ` … (cut: the message was ${p.cut} bytes; the Messages tab keeps more of it)` }) : null);
}

// ---------------------------------------------------------------------------------------------- the server's requests

function renderAsk(req) {
  S.asks.set(req.id, req);
  const box = h("article", { class: "ask", role: "dialog", "aria-modal": "false", "aria-labelledby": `${req.id}-title`, dataset: { id: req.id, kind: req.kind } });
  const p = req.params || {};
  const who = h("strong", { text: req.server || "the server" });
  const status = h("div", { class: "err", "aria-live": "assertive" });
  const send = async (answer) => {
    const r = await api("answer", { id: req.id, answer });
    if (r.error) status.textContent = errorText(r.error);
  };
  if (req.kind === "elicitation" && p.mode === "url") {
    const { box: urlBox, url, warning } = urlView(p.url);
    box.append(h("h3", { id: `${req.id}-title` }, who, " asks you to open a link"), h("p", { class: "ask-message", text: String(p.message || "") }), urlBox);
    if (warning) box.append(h("p", { class: "badge warn", text: warning }));
    box.append(h("div", { class: "actions" },
      h("button", { type: "button", class: "secondary", text: "Open the link", disabled: !url, onclick: () => openLink(p.url) }),
      h("button", { type: "button", text: "Accept (I opened it)", onclick: () => send({ action: "accept" }) }),
      h("button", { type: "button", class: "secondary", text: "Decline", onclick: () => send({ action: "decline" }) }),
      h("button", { type: "button", class: "secondary", text: "Cancel", onclick: () => send({ action: "cancel" }) })), status);
  } else if (req.kind === "elicitation") {
    const form = buildForm(p.requestedSchema || {});
    box.append(h("h3", { id: `${req.id}-title` }, who, " asks you"), h("p", { class: "ask-message", text: String(p.message || "") }),
      h("form", { class: "schema", novalidate: true, onsubmit: (e) => {
        e.preventDefault();
        const v = form.value();
        if (!v.ok) {
          status.textContent = v.error;
          return;
        }
        send({ action: "accept", content: v.value });
      } }, form.el, h("div", { class: "actions" },
        h("button", { type: "submit", text: "Accept" }),
        h("button", { type: "button", class: "secondary", text: "Decline", onclick: () => send({ action: "decline" }) }),
        h("button", { type: "button", class: "secondary", text: "Cancel", onclick: () => send({ action: "cancel" }) }))), status);
  } else {
    const id = `${req.id}-reply`;
    const reply = h("textarea", { id, rows: "4", required: true });
    const model = h("input", { id: `${id}-model`, type: "text", value: "mcpkit-inspector (a person)" });
    const stop = h("select", { id: `${id}-stop` }, ["endTurn", "stopSequence", "maxTokens"].map((s) => h("option", { text: s })));
    const details = h("details", {}, h("summary", { text: "The whole request" }), jsonView(p));
    box.append(h("h3", { id: `${req.id}-title` }, who, " asks for a model's reply (sampling)"));
    if (p.systemPrompt) box.append(h("div", { class: "kind", text: "system prompt" }), h("pre", { text: String(p.systemPrompt) }));
    box.append(messagesView(p.messages), h("p", { class: "muted", text: `maxTokens ${p.maxTokens ?? "?"}${p.temperature !== undefined ? ` · temperature ${p.temperature}` : ""}${Array.isArray(p.tools) ? ` · ${p.tools.length} tools offered` : ""}` }), details,
      h("form", { class: "schema", onsubmit: (e) => {
        e.preventDefault();
        send({ action: "accept", text: reply.value, model: model.value, stopReason: stop.value });
      } },
        h("div", { class: "field" }, h("label", { for: id, text: "Your reply, as the model" }), reply),
        h("div", { class: "field" }, h("label", { for: `${id}-model`, text: "Model name" }), model),
        h("div", { class: "field" }, h("label", { for: `${id}-stop`, text: "Stop reason" }), stop),
        h("div", { class: "actions" }, h("button", { type: "submit", text: "Send the reply" }),
          h("button", { type: "button", class: "secondary", text: "Reject", onclick: () => send({ action: "reject" }) }))), status);
  }
  $("asks").append(box);
  const first = box.querySelector("input, textarea, select, button");
  if (first) first.focus();
  announce(`${req.server || "The server"} asks for your answer`);
}

function removeAsk(id) {
  S.asks.delete(id);
  const el = document.querySelector(`.ask[data-id="${CSS.escape(id)}"]`);
  if (el) el.remove();
}

// ---------------------------------------------------------------------------------------------- events

// Over HTTP nothing tells the inspector that the server went away until a request fails: while this page is shown
// and nothing has come for PROBE_IDLE_MS, it has the inspector ping the server (the inspector pings at most once per
// 2 s, however many pages ask), which shows "not answering" and, once the server answers again, "connected".
const PROBE_IDLE_MS = 5000;
let lastEventAt = Date.now();
let probing = false;

async function probeWhenIdle() {
  const st = S.state;
  if (!st || !st.probe || (st.status !== "connected" && st.status !== "unreachable")) return;
  if (document.visibilityState !== "visible" || probing || Date.now() - lastEventAt < PROBE_IDLE_MS) return;
  probing = true;
  try {
    await api("probe");
  } finally {
    probing = false;
    lastEventAt = Date.now();
  }
}

function onEvent(ev) {
  lastEventAt = Date.now();
  if (held && ev.type !== "hello" && ev.type !== "resync") {
    if (held.length < MAX_HELD) held.push(ev);
    else {
      held = []; // (what came before is in the state read again)
      once("refresh", refresh);
    }
    return;
  }
  drawFor(ev.type);
  switch (ev.type) {
    case "hello":
      S.log = ev.log || [];
      applyState(ev.state, true);
      renderLog();
      break;
    case "state":
      applyState(ev.state, false);
      break;
    case "extra":
      if (S.state) S.state.extra = ev.extra;
      renderDev();
      break;
    case "log":
      if (!S.log.length || ev.entry.seq > S.log[S.log.length - 1].seq) addLog(ev.entry); // (held: maybe read already)
      break;
    case "call":
      S.calls.set(ev.call.id, ev.call);
      markCall(ev.call.id);
      break;
    case "view-progress":
      viewProgress(ev.viewId, ev.params);
      break;
    case "ask":
      if (!S.asks.has(ev.request.id)) renderAsk(ev.request);
      break;
    case "asked":
      removeAsk(ev.id);
      break;
    case "notification":
      onNotification(ev.method, ev.params || {});
      break;
    // A log message or stderr line numbered at most the last one taken in is one the page has: read in the state
    // while its event was held (it came between the queue's drop and the state's reading), it showed twice.
    case "serverlog": {
      if (ev.seq <= S.serverLogSeq) break;
      S.serverLogSeq = ev.seq;
      S.serverLog.push(ev.params || {});
      if (S.serverLog.length > MAX_SERVER_LINES) S.serverLog.shift();
      const rows = $("server-log");
      if (rows) {
        rows.append(serverLogRow(ev.params || {}));
        while (rows.children.length > MAX_SERVER_LINES) rows.removeChild(rows.firstChild);
      }
      break;
    }
    case "stderr":
      if (ev.seq <= S.stderrSeq) break;
      S.stderrSeq = ev.seq;
      S.stderr.push(ev.line);
      if (S.stderr.length > MAX_SERVER_LINES) S.stderr.shift();
      markStderr();
      break;
    case "roots":
      if (S.state) S.state.roots = ev.roots;
      break;
    case "subscriptions":
      if (S.state) S.state.subscriptions = ev.subscriptions;
      break;
    case "resync":
      document.body.dataset.resyncs = String(Number(document.body.dataset.resyncs || 0) + 1);
      if (held) held = []; // (what came before is in the state read again)
      once("refresh", refresh);
      break;
    default:
      break;
  }
}

// Work asked for again while it runs is done once more after it, not once per asking: a server sending thousands
// of list_changed would have the page list thousands of times, and a page that fell behind (each "resync" has it
// fetch the state and the whole log and draw them again) would redraw once per resync of its backlog.
const RUNNING = new Map();

async function once(key, work) {
  if (RUNNING.has(key)) {
    RUNNING.set(key, true);
    return;
  }
  try {
    do {
      RUNNING.set(key, false);
      await work();
    } while (RUNNING.get(key));
  } finally {
    RUNNING.delete(key);
  }
}

function relist(kind) {
  return once(`list:${kind}`, () => loadList(kind));
}

function onNotification(method, params) {
  if (method === "notifications/tools/list_changed") relist("tools");
  else if (method === "notifications/prompts/list_changed") relist("prompts");
  else if (method === "notifications/resources/list_changed") {
    relist("resources");
    relist("templates");
  } else if (method === "notifications/resources/updated" && typeof params.uri === "string") {
    S.updated.set(params.uri, new Date().toLocaleTimeString());
    announce(`${params.uri} was updated`);
    if (S.selected.resource && S.selected.resource.uri === params.uri) readResource(params.uri, S.selected.resource);
    else if ($("resource-detail").querySelector("code") && $("resource-detail").querySelector("code").textContent === params.uri) readResource(params.uri, null);
    renderList("resources");
  }
}

function applyState(state, initial) {
  const was = S.state ? S.state.status : null;
  const wasVersion = S.state ? S.state.protocolVersion : null;
  const wasGeneration = S.state ? S.state.generation : null;
  S.state = state;
  S.stderr = (state.stderr || []).slice(-MAX_SERVER_LINES);
  S.stderrSeq = state.stderrSeq || 0;
  if (Array.isArray(state.serverLog)) { // (the whole state only)
    S.serverLog = state.serverLog.slice(-MAX_SERVER_LINES);
    S.serverLogSeq = state.serverLogSeq || 0;
  }
  renderHeader();
  renderServer();
  if (initial) {
    renderRoots();
    // Drawn again (the event stream reopened, or a resync): a call still kept is redrawn in place, so its MCP Apps
    // view lives on (views close when the connection they were opened on is replaced, below); a call no longer
    // kept goes, with its view.
    draw(); // (a call not yet drawn is drawn to go now, not later from what the page took in before this state)
    const kept = new Set((state.calls || []).map((c) => c.id));
    for (const el of [...$("calls").querySelectorAll(":scope > .call")]) {
      if (!kept.has(el.dataset.id)) dropCall(el, "the inspector no longer keeps its call");
    }
    for (const c of state.calls || []) renderCall(c);
    dropOldCalls();
    clear($("asks"));
    S.asks.clear();
    for (const r of state.pending || []) renderAsk(r);
  }
  const fresh = was !== "connected" || wasVersion !== state.protocolVersion || wasGeneration !== state.generation;
  if (wasGeneration !== null && wasGeneration !== state.generation) closeViews("the inspector reconnected");
  if (state.status === "connected" && (initial || fresh)) {
    renderRoots();
    reloadAll();
  }
  if (state.status !== "connected" && state.status !== "unreachable" && was === "connected") {
    clear($("asks"));
    S.asks.clear();
  }
}

// The state and the log are read while events still come, and the answer may be older than the events the page takes
// in meanwhile (it came after 9,000 of them in a burst): those events are held and applied after it, in order (a
// call finished meanwhile is not shown running again, one started meanwhile not dropped). Past MAX_HELD the held
// events are dropped and the state read once more, as the inspector does for a page that falls behind.
const MAX_HELD = 4000;
let held = null;

async function refresh() {
  held = [];
  const r = await api("state");
  const l = await api("log", { since: 0 });
  const events = held;
  held = null;
  if (!r.error) applyState(r.result, true);
  if (!l.error) {
    S.log = l.result.entries;
    renderLog();
  }
  for (const ev of events) onEvent(ev);
}

async function stream() {
  let delay = 250;
  for (;;) {
    try {
      const resp = await fetch("/api/events", { headers: { Authorization: `Bearer ${TOKEN}` }, cache: "no-store" });
      if (resp.status === 401) {
        fatal("This page has no valid token. Open the URL that mcpkit inspect printed (it ends with #token=…).");
        return;
      }
      if (!resp.ok || !resp.body) throw new Error(`HTTP ${resp.status}`);
      document.body.dataset.live = "true";
      delay = 250;
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let start = 0; // (the buffer is cut once per read, not once per event: a backlog's read holds thousands)
        for (let at; (at = buf.indexOf("\n\n", start)) >= 0; start = at + 2) {
          const chunk = buf.slice(start, at);
          const data = chunk.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          if (data) {
            try {
              onEvent(JSON.parse(data));
            } catch (err) {
              console.error("inspector event", err);
            }
          }
        }
        buf = buf.slice(start);
      }
    } catch (err) {
      /* the stream broke: try again */
    }
    document.body.dataset.live = "false";
    $("status-text").textContent = "the inspector is not answering: retrying…";
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 5000);
  }
}

function fatal(message) {
  const banner = $("banner");
  clear(banner).append(message);
  banner.hidden = false;
}

// ---------------------------------------------------------------------------------------------- tabs, controls

function activateTab(id) {
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    const on = tab.id === id;
    tab.setAttribute("aria-selected", on ? "true" : "false");
    tab.tabIndex = on ? 0 : -1;
    $(tab.getAttribute("aria-controls")).hidden = !on;
  }
  if (id === "tab-tasks") loadTasks();
  if (id === "tab-server") renderServer();
}

function setupTabs() {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => activateTab(tab.id));
    tab.addEventListener("keydown", (e) => {
      let j = null;
      if (e.key === "ArrowDown" || e.key === "ArrowRight") j = (i + 1) % tabs.length;
      else if (e.key === "ArrowUp" || e.key === "ArrowLeft") j = (i - 1 + tabs.length) % tabs.length;
      else if (e.key === "Home") j = 0;
      else if (e.key === "End") j = tabs.length - 1;
      if (j !== null) {
        e.preventDefault();
        tabs[j].focus();
        activateTab(tabs[j].id);
      }
    });
  });
}

function setup() {
  drawCallsWith(renderCall);
  setupTabs();
  $("connect-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const r = await api("connect", { mode: $("mode").value, protocolVersion: $("pin").value || null });
    if (r.error) fatal(errorText(r.error));
  });
  $("disconnect").addEventListener("click", () => api("disconnect"));
  $("tools-refresh").addEventListener("click", () => loadList("tools"));
  $("resources-refresh").addEventListener("click", () => {
    loadList("resources");
    loadList("templates");
  });
  $("prompts-refresh").addEventListener("click", () => loadList("prompts"));
  $("tasks-refresh").addEventListener("click", () => loadTasks());
  $("log-filters").addEventListener("submit", (e) => e.preventDefault());
  $("log-text").addEventListener("input", (e) => filterLog("text", e.target.value));
  $("log-dir").addEventListener("change", (e) => filterLog("dir", e.target.value));
  $("log-kind").addEventListener("change", (e) => filterLog("kind", e.target.value));
  $("log-pause").addEventListener("change", (e) => {
    if (!e.target.checked) renderLog();
  });
  $("log-clear").addEventListener("click", async () => {
    await api("log-clear");
    S.log = [];
    renderLog();
  });
  if (!TOKEN) fatal("This page has no token. Open the URL that mcpkit inspect printed (it ends with #token=…).");
  else {
    stream();
    setInterval(probeWhenIdle, 1000);
  }
}

setup();
