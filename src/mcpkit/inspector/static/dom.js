// Building the page from data. Every string a server sent becomes a text node (textContent, or a node made by
// h() from a string): nothing here parses a string as HTML, and no attribute is ever an event handler string.

export const $ = (id) => document.getElementById(id);

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "text") el.textContent = String(value);
      else if (key === "for") el.htmlFor = value;
      else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
      else if (key === "value") el.value = value;
      else if (key === "checked") el.checked = !!value;
      else if (key === "disabled") el.disabled = !!value;
      else if (key === "hidden") el.hidden = !!value;
      else if (key === "dataset") Object.assign(el.dataset, value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren(); // (one change of the document, not one per child)
  return el;
}

let counter = 0;
export function uid(prefix = "f") {
  counter += 1;
  return `${prefix}-${counter}`;
}

// A description's pieces ([style, text] pairs from mcpkit.client.display.segments) as elements.
export function segmentsView(segments, tag = "p") {
  const el = h(tag, { class: "desc" });
  for (const [style, piece] of segments || []) {
    if (style === "code") el.append(h("code", { text: piece }));
    else if (style === "strong") el.append(h("strong", { text: piece }));
    else if (style === "em") el.append(h("em", { text: piece }));
    else el.append(document.createTextNode(piece));
  }
  return el;
}

export function jsonText(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch (e) {
    return String(value);
  }
}

export function jsonView(value, label) {
  const pre = h("pre", { class: "json", text: jsonText(value) });
  if (label) pre.setAttribute("aria-label", label);
  return pre;
}

// Only http(s) URLs are ever opened, only on a click, in a new tab without opener or referrer.
export function httpUrl(raw) {
  try {
    const url = new URL(String(raw));
    return url.protocol === "http:" || url.protocol === "https:" ? url : null;
  } catch (e) {
    return null;
  }
}

export function openLink(raw) {
  const url = httpUrl(raw);
  if (!url) return false;
  window.open(url.href, "_blank", "noopener,noreferrer");
  return true;
}

// The URL as text with its host in bold (so a look-alike host stands out), and a warning for punycode or
// characters outside ASCII in the host.
export function urlView(raw) {
  const box = h("div", { class: "url-box" });
  const url = httpUrl(raw);
  const text = String(raw);
  if (!url) {
    box.append(document.createTextNode(text));
    return { box, url: null, warning: "not an http(s) link: it will not be opened" };
  }
  const host = url.host;
  const at = text.indexOf(host);
  if (at >= 0) {
    box.append(document.createTextNode(text.slice(0, at)), h("strong", { text: host }), document.createTextNode(text.slice(at + host.length)));
  } else {
    box.append(document.createTextNode(text), " (host: ", h("strong", { text: host }), ")");
  }
  let warning = null;
  if (/(^|\.)xn--/i.test(url.hostname) || /[^\x00-\x7f]/.test(text)) warning = "the host uses punycode or characters outside ASCII: check it is the site you expect";
  else if (url.protocol === "http:" && !["localhost", "127.0.0.1", "[::1]"].includes(url.hostname)) warning = "not encrypted (http)";
  return { box, url, warning };
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

// A data: URL for an image or an audio clip, only for a well-formed MIME type of that kind and base64 data.
export function dataUrl(kind, mimeType, data) {
  const mime = String(mimeType || "").trim().toLowerCase();
  if (!new RegExp(`^${kind}/[a-z0-9][a-z0-9.+-]*$`).test(mime)) return null;
  const clean = String(data || "").replace(/\s+/g, "");
  if (!BASE64.test(clean)) return null;
  return `data:${mime};base64,${clean}`;
}

export function base64Bytes(data) {
  const clean = String(data || "").replace(/\s+/g, "");
  if (!BASE64.test(clean)) return null;
  try {
    const bin = atob(clean);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i += 1) out[i] = bin.charCodeAt(i);
    return out;
  } catch (e) {
    return null;
  }
}

export function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

// A download of bytes the server sent, always as application/octet-stream (never rendered by the browser).
export function downloadButton(bytes, name) {
  return h("button", {
    type: "button",
    class: "secondary",
    text: "Save…",
    onclick: () => {
      const blob = new Blob([bytes], { type: "application/octet-stream" });
      const href = URL.createObjectURL(blob);
      const a = h("a", { href, download: (name || "resource").replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 100) || "resource" });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(href), 10000);
    },
  });
}

export function hexPreview(bytes, max = 48) {
  const shown = Array.from(bytes.slice(0, max), (b) => b.toString(16).padStart(2, "0")).join(" ");
  return shown + (bytes.length > max ? " …" : "");
}

export function announce(message) {
  const live = document.getElementById("live");
  if (live) live.textContent = String(message);
}
