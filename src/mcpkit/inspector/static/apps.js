// The inspector page as an MCP Apps host (SEP-1865, apps protocol 2026-01-26). A called tool whose definition links
// to a view (_meta.ui.resourceUri) is shown in a frame of the sandbox proxy, served from another origin (its own
// port): the view can never reach this page's token or API. The page is the host side of the view protocol:
// ui/initialize with the host context, tool input and result (or cancellation) notifications, size changes,
// display modes, ui/open-link (http(s) only, on the person's confirmation), ui/message and model-context updates
// shown, teardown; the view's tools/call, resources/read and the other allowed requests go to the inspector, which
// sends them through its client (they appear in the message log). Everything a view sends is checked here first:
// its shape, its size, its rate (a flood is dropped and reported), the requests waiting for the server; and what
// the view did is listed under it.
import { clear, h, httpUrl, jsonText, urlView } from "./dom.js";

export const APPS_PROTOCOL_VERSION = "2026-01-26";
const MAX_MESSAGE_CHARS = 1024 * 1024; // a message from a view, as JSON
const RATE = 50; // messages a second from one view (bursts of BURST)
const BURST = 100;
const MAX_WAITING = 8; // forwarded requests of one view waiting for the server
const MAX_QUEUED = 32; // and queued behind them
const MAX_ACTIVITY = 200; // lines of "what the view did"
const TEARDOWN_WAIT_MS = 2000;
const HANDSHAKE_WAIT_MS = 5000; // a view silent this long after its document is loaded is pointed out
// views shown at once (the inspector's views.MAX_VIEWS: it forgets the oldest beyond that); the oldest is torn down
// for a new one, so no frame is left running that the inspector no longer answers
export const MAX_OPEN_VIEWS = 32;
const MAX_HEIGHT = 2000;
const INLINE_MAX_HEIGHT = 640;
const HOST_MODES = ["inline", "fullscreen"];
const FORWARDED = new Set(["tools/call", "tools/list", "resources/read", "resources/list", "resources/templates/list"]);

const hosts = new Map(); // call id -> ViewHost

function uiOf(tool) {
  const meta = (tool && tool._meta) || {};
  const ui = meta.ui && typeof meta.ui === "object" ? meta.ui : {};
  const uri = typeof ui.resourceUri === "string" ? ui.resourceUri : typeof meta["ui/resourceUri"] === "string" ? meta["ui/resourceUri"] : null;
  return uri && uri.startsWith("ui://") ? uri : null;
}

function theme() {
  return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function short(value, n = 300) {
  const text = typeof value === "string" ? value : jsonText(value);
  return text.length > n ? `${text.slice(0, n)}…` : text;
}

class ViewHost {
  constructor(call, tool, slot, api) {
    this.call = call;
    this.tool = tool;
    this.api = api;
    this.uri = uiOf(tool);
    this.view = null; // what /api/view-open answered
    this.initialized = false;
    this.closed = false;
    this.closing = false;
    this.appModes = null;
    this.mode = "inline";
    this.nextId = 1;
    this.pending = new Map(); // our requests to the view
    this.waiting = 0;
    this.queue = [];
    this.tokens = BURST;
    this.stamp = performance.now();
    this.dropped = 0;
    this.droppedShown = 0;
    this.sentResult = false;
    this.box = h("section", { class: "app-view", "aria-label": `View of ${call.name}`, dataset: { call: call.id, state: "loading" } });
    this.head = h("div", { class: "app-head" }, h("span", { class: "kind", text: "MCP Apps view" }), h("code", { text: this.uri }));
    this.frameBox = h("div", { class: "app-frame" });
    this.notes = h("ol", { class: "app-activity", "aria-label": `What the view of ${call.name} did`, "aria-live": "polite" });
    this.closeButton = h("button", { type: "button", class: "secondary", text: "Close view", onclick: () => this.teardown("closed by the person") });
    this.exitButton = h("button", { type: "button", class: "secondary", text: "Exit fullscreen", hidden: true, onclick: () => this.setMode("inline") });
    this.head.append(this.exitButton, this.closeButton);
    this.box.append(this.head, this.frameBox, this.notes);
    slot.append(this.box);
    this.onMessage = (event) => this.receive(event);
    this.onTheme = () => this.initialized && this.notify("ui/notifications/host-context-changed", { theme: theme() });
    window.addEventListener("message", this.onMessage);
    if (window.matchMedia) window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", this.onTheme);
    this.open();
  }

  note(kind, text, extra) {
    const row = h("li", { class: `app-note ${kind}`, dataset: { kind } }, h("span", { class: "app-note-kind", text: kind }), " ", text);
    if (extra) row.append(extra);
    this.notes.append(row);
    while (this.notes.childElementCount > MAX_ACTIVITY) this.notes.firstElementChild.remove();
    return row;
  }

  async open() {
    const r = await this.api("view-open", { tool: this.tool, origin: location.origin });
    if (this.closed) return;
    if (r.error) {
      this.box.dataset.state = "failed";
      this.note("error", `the view cannot be shown: ${r.error.message || "error"}`);
      return;
    }
    this.view = r.result;
    for (const problem of this.view.problems || []) this.note("warning", problem);
    const csp = this.view.csp || {};
    const lists = Object.entries(csp).map(([k, v]) => `${k}: ${v.join(" ")}`);
    this.note("info", `loaded ${this.view.uri} (${this.view.size} bytes); CSP ${lists.length ? lists.join("; ") : "default (no outside connections)"}`);
    this.box.classList.toggle("bordered", this.view.prefersBorder !== false);
    this.frame = h("iframe", {
      class: "app-iframe",
      title: `MCP Apps view of ${this.call.name}`,
      src: this.view.sandboxUrl,
      sandbox: "allow-scripts allow-same-origin allow-forms",
      referrerpolicy: "no-referrer",
    });
    if (this.view.allow) this.frame.setAttribute("allow", this.view.allow);
    this.frame.style.height = "160px";
    this.frameBox.append(this.frame);
    // the frame's width is the host's (fixed: the view fills it), its height the view's up to a maximum (inline) or
    // the host's (fullscreen); a change is sent as host-context-changed
    if (window.ResizeObserver) {
      this.resized = new ResizeObserver(() => this.initialized && !this.closed && this.contextChanged({}));
      this.resized.observe(this.frame);
    }
  }

  // ------------------------------------------------------------------ messages from the view (via the sandbox)

  receive(event) {
    if (!this.frame || event.source !== this.frame.contentWindow) return;
    if (!this.view || event.origin !== new URL(this.view.sandboxUrl).origin) return;
    if (this.closed) return;
    if (!this.take()) {
      this.dropped += 1;
      this.reportDrops();
      const m = event.data; // (a request dropped is still answered, cheaply: the view does not wait forever)
      if (m && typeof m === "object" && typeof m.method === "string" && (typeof m.id === "string" || Number.isFinite(m.id))) {
        this.reply(m.id, null, { code: -32000, message: `too many messages (more than ${RATE} a second): dropped` });
      }
      return;
    }
    const msg = event.data;
    let size = 0;
    try {
      size = JSON.stringify(msg).length;
    } catch (e) {
      size = Infinity;
    }
    if (size > MAX_MESSAGE_CHARS) {
      this.note("refused", `dropped a message of ${size === Infinity ? "unreadable" : size} characters (more than ${MAX_MESSAGE_CHARS})`);
      const id = msg && typeof msg === "object" ? msg.id : undefined;
      if (typeof id === "string" || typeof id === "number") this.reply(id, null, { code: -32600, message: "message too large" });
      return;
    }
    if (!msg || typeof msg !== "object" || Array.isArray(msg) || msg.jsonrpc !== "2.0") {
      this.note("refused", `dropped a malformed message (not a JSON-RPC 2.0 object): ${short(msg, 120)}`);
      return;
    }
    const hasId = typeof msg.id === "string" || (typeof msg.id === "number" && Number.isFinite(msg.id));
    if (typeof msg.method === "string") {
      if (msg.params !== undefined && (typeof msg.params !== "object" || msg.params === null || Array.isArray(msg.params))) {
        this.note("refused", `dropped ${msg.method}: its params are not an object`);
        return hasId ? this.reply(msg.id, null, { code: -32602, message: "params must be an object" }) : undefined;
      }
      if (msg.id !== undefined && !hasId) {
        this.note("refused", `dropped ${msg.method}: its id is neither a string nor a number`);
        return;
      }
      return hasId ? this.onRequest(msg) : this.onNotification(msg);
    }
    if (hasId && ("result" in msg || "error" in msg)) {
      const waiter = this.pending.get(msg.id);
      if (!waiter) return this.note("refused", `dropped an answer to no request of ours (id ${short(msg.id, 40)})`);
      this.pending.delete(msg.id);
      return waiter(msg);
    }
    this.note("refused", `dropped a malformed message: ${short(msg, 120)}`);
  }

  take() {
    const now = performance.now();
    this.tokens = Math.min(BURST, this.tokens + ((now - this.stamp) / 1000) * RATE);
    this.stamp = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  reportDrops() {
    if (this.dropTimer) return;
    this.dropTimer = setTimeout(() => {
      this.dropTimer = null;
      const n = this.dropped - this.droppedShown;
      this.droppedShown = this.dropped;
      if (n > 0) this.note("refused", `the view sent too many messages: ${n} dropped (more than ${RATE} a second); ${this.dropped} in all`);
    }, 500);
  }

  onNotification(msg) {
    const p = msg.params || {};
    switch (msg.method) {
      case "ui/notifications/sandbox-proxy-ready":
        if (!this.sentDocument) this.sandboxReady();
        this.sentDocument = true;
        return;
      case "ui/notifications/initialized":
        if (this.initialized) return;
        this.initialized = true;
        this.box.dataset.state = "ready";
        this.notify("ui/notifications/tool-input", { arguments: this.call.arguments || {} });
        this.deliver();
        return;
      case "ui/notifications/size-changed":
        if (typeof p.height === "number" && Number.isFinite(p.height) && this.frame) {
          const cap = this.mode === "fullscreen" ? MAX_HEIGHT : INLINE_MAX_HEIGHT;
          this.frame.style.height = `${Math.max(40, Math.min(cap, Math.ceil(p.height)))}px`;
        }
        return;
      case "notifications/message":
        this.note("log", `${p.level || "info"}: ${short(p.data)}`);
        return;
      case "ui/notifications/request-teardown":
        this.note("info", "the view asked to be closed");
        this.teardown("requested by the view");
        return;
      default:
        this.note("refused", `ignored the notification ${short(msg.method, 100)}`);
    }
  }

  onRequest(msg) {
    const p = msg.params || {};
    if (msg.method === "ui/initialize") return this.initialize(msg, p);
    if (msg.method === "ping") return this.reply(msg.id, {});
    if (!this.initialized && msg.method !== "ui/initialize") {
      // (a view that skips the handshake still gets answers; it is told once)
      if (!this.toldUninitialized) this.note("warning", `the view sent ${short(msg.method, 80)} before ui/notifications/initialized`);
      this.toldUninitialized = true;
    }
    switch (msg.method) {
      case "ui/open-link":
        return this.openLink(msg, p);
      case "ui/message": {
        // (role "user" only, content blocks: the spec's error otherwise, and nothing shown as sent)
        const blocks = Array.isArray(p.content) ? p.content : p.content && typeof p.content === "object" ? [p.content] : null;
        if (p.role !== "user" || !blocks || !blocks.every((c) => c && typeof c === "object" && typeof c.type === "string")) {
          this.note("refused", `refused ui/message: role ${short(p.role, 40)}${blocks ? "" : ", no content blocks"} (a view sends role "user" with content blocks only)`);
          return this.reply(msg.id, null, { code: -32000, message: "Invalid message format" });
        }
        const text = blocks.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join(" ");
        this.note("message", `the view sends to the conversation (user): ${short(text)}`);
        return this.reply(msg.id, {});
      }
      case "ui/update-model-context": {
        const text = (Array.isArray(p.content) ? p.content : []).map((c) => (c && c.type === "text" ? c.text : `[${c && c.type}]`)).join(" ");
        const shown = [text, p.structuredContent !== undefined ? short(p.structuredContent, 200) : ""].filter(Boolean).join(" · ");
        if (this.contextRow) this.contextRow.remove();
        this.contextRow = this.note("context", `model context now: ${shown || "(empty)"}`);
        return this.reply(msg.id, {});
      }
      case "ui/request-display-mode": {
        const wanted = p.mode;
        if (this.offers(wanted)) this.setMode(wanted);
        else this.note("refused", `the view asked for display mode ${short(wanted, 40)}: not available${this.appModes && !this.appModes.includes(wanted) ? " (the view did not declare it)" : ""}`);
        return this.reply(msg.id, { mode: this.mode }); // (the mode it is in: unchanged when refused)
      }
      default:
        if (FORWARDED.has(msg.method)) return this.forward(msg);
        this.note("refused", `refused ${short(msg.method, 100)}: a view may not ask that of the host`);
        return this.reply(msg.id, null, { code: -32601, message: `Method not found: ${String(msg.method).slice(0, 100)}` });
    }
  }

  initialize(msg, p) {
    this.greeted = true;
    const caps = (p && p.appCapabilities) || {};
    this.appModes = Array.isArray(caps.availableDisplayModes) ? caps.availableDisplayModes.filter((m) => typeof m === "string") : null;
    // a view is never in a mode it did not declare: one that lacks inline starts in a declared mode the host has
    if (!this.offers(this.mode)) {
      const mode = HOST_MODES.find((m) => this.offers(m));
      if (mode) this.setMode(mode);
      else this.note("warning", `the view declares the display modes ${short(this.appModes.join(", "), 80)}, none of which this host has (${HOST_MODES.join(", ")}): it is shown ${this.mode}`);
    }
    const info = p && p.appInfo && typeof p.appInfo.name === "string" ? `${p.appInfo.name} ${p.appInfo.version || ""}`.trim() : "a view";
    this.note("info", `${info} connected (apps protocol ${short(p && p.protocolVersion, 20)})`);
    const tool = { ...(this.tool || { name: this.call.name }) };
    const dims = this.dimensions();
    this.sentDimensions = JSON.stringify(dims);
    delete tool._display;
    this.reply(msg.id, {
      protocolVersion: APPS_PROTOCOL_VERSION,
      hostInfo: { name: "mcpkit-inspector", version: "1" },
      hostCapabilities: {
        openLinks: {},
        serverTools: {},
        serverResources: {},
        logging: {},
        message: { text: {} },
        updateModelContext: { text: {}, structuredContent: {} },
        sandbox: { csp: this.view.csp || {}, permissions: this.view.permissions || {} },
      },
      hostContext: {
        // (the JSON-RPC id the server saw, once the client sent the request: it is optional, left out until then)
        toolInfo: { ...(this.call.requestId !== undefined && this.call.requestId !== null ? { id: this.call.requestId } : {}), tool },
        theme: theme(),
        displayMode: this.mode,
        availableDisplayModes: HOST_MODES,
        containerDimensions: dims,
        locale: navigator.language || "en",
        timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
        userAgent: "mcpkit-inspector",
        platform: "web",
        deviceCapabilities: { touch: "ontouchstart" in window, hover: window.matchMedia ? window.matchMedia("(hover: hover)").matches : true },
      },
    });
  }

  dimensions() {
    const height = this.mode === "fullscreen" && this.frame ? { height: this.frame.clientHeight } : { maxHeight: INLINE_MAX_HEIGHT };
    const width = this.frame ? this.frame.clientWidth : 0;
    return width > 0 ? { width, ...height } : height;
  }

  // host-context-changed with `changes`, and the container's dimensions when they differ from the ones last sent
  contextChanged(changes) {
    const dims = this.dimensions();
    const key = JSON.stringify(dims);
    const params = { ...changes };
    if (key !== this.sentDimensions) params.containerDimensions = dims;
    this.sentDimensions = key;
    if (Object.keys(params).length) this.notify("ui/notifications/host-context-changed", params);
  }

  // whether the host may put the view in `mode`: the host has it, and the view declared it (or declared no modes)
  offers(mode) {
    return HOST_MODES.includes(mode) && (!this.appModes || this.appModes.includes(mode));
  }

  setMode(mode) {
    this.mode = mode;
    this.box.classList.toggle("fullscreen", mode === "fullscreen");
    this.exitButton.hidden = mode !== "fullscreen" || !this.offers("inline"); // (otherwise: "Close view" only)
    if (this.initialized) this.contextChanged({ displayMode: mode });
    this.note("info", `display mode: ${mode}`);
  }

  openLink(msg, p) {
    const url = httpUrl(p.url);
    if (!url) {
      this.note("refused", `the view asked to open ${short(p.url, 200)}: only http(s) links are opened`);
      return this.reply(msg.id, null, { code: -32000, message: "Invalid URL" });
    }
    const shown = urlView(url.href);
    const decide = (open) => {
      row.querySelectorAll("button").forEach((b) => b.remove());
      if (open) {
        window.open(url.href, "_blank", "noopener,noreferrer");
        row.append(" — opened");
        this.reply(msg.id, {});
      } else {
        row.append(" — not opened");
        this.reply(msg.id, null, { code: -32000, message: "Link opening denied by user" });
      }
    };
    const row = this.note("link", "the view asks to open ", h("span", {}, shown.box, shown.warning ? h("span", { class: "warn", text: ` (${shown.warning})` }) : null));
    row.append(" ", h("button", { type: "button", text: "Open", onclick: () => decide(true) }), " ", h("button", { type: "button", class: "secondary", text: "Don't open", onclick: () => decide(false) }));
  }

  forward(msg) {
    if (this.waiting >= MAX_WAITING) {
      if (this.queue.length >= MAX_QUEUED) {
        this.note("refused", `refused ${msg.method}: ${MAX_WAITING} requests already wait for the server and ${MAX_QUEUED} more are queued`);
        return this.reply(msg.id, null, { code: -32000, message: "too many requests wait for the server" });
      }
      this.queue.push(msg);
      return;
    }
    this.waiting += 1;
    const what = msg.method === "tools/call" ? `tools/call ${short((msg.params || {}).name, 80)}` : `${msg.method} ${short((msg.params || {}).uri || "", 120)}`.trim();
    this.api("view-request", { viewId: this.view.viewId, method: msg.method, params: msg.params || {} }).then((r) => {
      this.waiting -= 1;
      if (r.error) {
        const code = typeof r.error.code === "number" ? r.error.code : -32603;
        this.note(code === -32601 || code === -32000 ? "refused" : "error", `${what}: ${r.error.message || "failed"}`);
        this.reply(msg.id, null, { code, message: r.error.message || "failed", ...(r.error.data !== undefined && r.error.data !== null ? { data: r.error.data } : {}) });
      } else {
        this.note("request", `${what}: answered by the server`);
        this.reply(msg.id, r.result);
      }
      const next = this.queue.shift();
      if (next && !this.closed) this.forward(next);
    });
  }

  // ------------------------------------------------------------------ messages to the view

  post(msg) {
    if (!this.frame || !this.frame.contentWindow || !this.view) return;
    this.frame.contentWindow.postMessage(msg, new URL(this.view.sandboxUrl).origin);
  }

  reply(id, result, error) {
    if (this.closed) return;
    this.post(error ? { jsonrpc: "2.0", id, error } : { jsonrpc: "2.0", id, result: result || {} });
  }

  notify(method, params) {
    this.post({ jsonrpc: "2.0", method, params });
  }

  request(method, params, timeoutMs) {
    return new Promise((resolve) => {
      const id = `host-${this.nextId++}`;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve(null);
      }, timeoutMs);
      this.pending.set(id, (answer) => {
        clearTimeout(timer);
        resolve(answer);
      });
      this.post({ jsonrpc: "2.0", id, method, params });
    });
  }

  // the sandbox is ready: send it the document; the view's lifecycle messages follow
  sandboxReady() {
    this.silentTimer = setTimeout(() => {
      if (!this.greeted && !this.closed) this.note("warning", `the view has not sent ui/initialize after ${HANDSHAKE_WAIT_MS / 1000} s: until it does, it gets neither the tool's input nor its result (a view speaks the MCP Apps protocol by hand or with the App SDK: see docs/guides/apps.md)`);
    }, HANDSHAKE_WAIT_MS);
    this.post({ jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: { html: this.view.html, csp: this.view.csp || {}, permissions: this.view.permissions || {} } });
  }

  update(call) {
    this.call = call;
    this.deliver();
  }

  deliver() {
    if (!this.initialized || this.sentResult) return;
    const call = this.call;
    if (call.status === "done" && call.result) {
      this.sentResult = true;
      this.notify("ui/notifications/tool-result", call.result);
    } else if (call.status === "cancelled" || call.status === "failed") {
      this.sentResult = true;
      const reason = call.status === "cancelled" ? "cancelled by the person" : `the call failed: ${(call.error && call.error.message) || "error"}`;
      this.notify("ui/notifications/tool-cancelled", { reason });
    }
  }

  async teardown(reason) {
    if (this.closed || this.closing) return; // (told once, however many ways it is closed meanwhile)
    this.closing = true;
    if (this.initialized) {
      const answer = await this.request("ui/resource-teardown", { reason }, TEARDOWN_WAIT_MS);
      if (!answer) this.note("warning", "the view did not answer ui/resource-teardown in time");
    }
    this.closed = true;
    clearTimeout(this.silentTimer);
    if (this.resized) this.resized.disconnect();
    window.removeEventListener("message", this.onMessage);
    if (window.matchMedia) window.matchMedia("(prefers-color-scheme: dark)").removeEventListener("change", this.onTheme);
    if (this.frame) this.frame.remove();
    this.frame = null;
    this.box.classList.remove("fullscreen");
    this.box.dataset.state = "closed";
    clear(this.frameBox).append(h("p", { class: "muted", text: `view closed (${reason})` }));
    this.closeButton.remove();
    this.exitButton.remove();
    if (this.view) this.api("view-close", { viewId: this.view.viewId });
    hosts.delete(this.call.id);
  }
}

// Called for every rendering of a call: shows its view once (in `slot`, which the page keeps across renderings),
// then tells the view how the call ends.
export function showCallView(call, slot, api) {
  const existing = hosts.get(call.id);
  if (existing) {
    existing.update(call);
    return;
  }
  const tool = call.tool || null;
  if (!uiOf(tool)) return;
  const open = [...hosts.values()].filter((host) => !host.closing);
  for (const host of open.slice(0, Math.max(0, open.length - MAX_OPEN_VIEWS + 1))) {
    host.teardown(`more than ${MAX_OPEN_VIEWS} views are open: the oldest is closed`);
  }
  hosts.set(call.id, new ViewHost(call, tool, slot, api));
}

// The progress of a view's forwarded request (the inspector's event "view-progress"): told to the view under the
// token it chose, which the inspector never sent to the server as it was.
export function viewProgress(viewId, params) {
  for (const host of hosts.values()) {
    if (host.view && host.view.viewId === viewId && host.initialized && !host.closed) {
      const { progressToken, progress, total, message } = params || {};
      host.notify("notifications/progress", { progressToken, progress, ...(total != null ? { total } : {}), ...(typeof message === "string" ? { message } : {}) });
    }
  }
}

export function closeView(callId, reason) {
  const host = hosts.get(callId);
  if (host) host.teardown(reason);
}

export function closeViews(reason) {
  for (const host of [...hosts.values()]) host.teardown(reason);
}

export function openViews() {
  return hosts.size;
}
