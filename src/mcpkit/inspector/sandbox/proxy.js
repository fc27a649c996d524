// The MCP Apps sandbox proxy of the mcpkit inspector (the spec's "Sandbox proxy"). It runs on its own origin, which
// is not the inspector's: nothing here can reach the inspector's token or API. It loads the view's HTML, sent by the
// inspector page, into an inner frame without allow-same-origin (the view gets an opaque origin), under the
// Content-Security-Policy this document was served with (inherited by the inner frame) and the same policy again as
// a <meta> in the view's own document; then it relays messages both ways, except the sandbox-* ones.
(() => {
  "use strict";
  const read = (name) => (document.querySelector(`meta[name="${name}"]`) || {}).content || "";
  const HOST = read("mcpkit-host");
  const POLICY = read("mcpkit-policy");
  const FEATURES = { camera: "camera", microphone: "microphone", geolocation: "geolocation", clipboardWrite: "clipboard-write" };
  const SANDBOX_PREFIX = "ui/notifications/sandbox-";
  let inner = null;

  if (window.parent === window || !HOST) return;

  function withPolicy(html) {
    const tag = `<meta http-equiv="Content-Security-Policy" content="${POLICY.replace(/"/g, "&quot;")}">`;
    const head = /<head(\s[^>]*)?>/i.exec(html);
    if (head) return html.slice(0, head.index + head[0].length) + tag + html.slice(head.index + head[0].length);
    return tag + html;
  }

  function load(params) {
    if (inner || !params || typeof params.html !== "string") return;
    inner = document.createElement("iframe");
    inner.setAttribute("sandbox", "allow-scripts allow-forms");
    const allow = Object.keys(params.permissions || {}).filter((k) => FEATURES[k]).map((k) => FEATURES[k]);
    if (allow.length) inner.setAttribute("allow", allow.join("; "));
    inner.setAttribute("title", "MCP Apps view");
    inner.srcdoc = withPolicy(params.html);
    document.body.appendChild(inner);
  }

  window.addEventListener("message", (event) => {
    const msg = event.data;
    if (inner && event.source === inner.contentWindow) {
      if (msg && typeof msg === "object" && typeof msg.method === "string" && msg.method.startsWith(SANDBOX_PREFIX)) return;
      try {
        window.parent.postMessage(msg, HOST);
      } catch (e) {
        /* not cloneable: dropped */
      }
      return;
    }
    if (event.source !== window.parent || event.origin !== HOST) return;
    if (msg && typeof msg === "object" && msg.method === SANDBOX_PREFIX + "resource-ready") {
      load(msg.params);
      return;
    }
    if (inner) inner.contentWindow.postMessage(msg, "*"); // (the view's origin is opaque: "*" is the only target)
  });

  window.parent.postMessage({ jsonrpc: "2.0", method: SANDBOX_PREFIX + "proxy-ready", params: {} }, HOST);
})();
