// Rendering what a server returns: content blocks (text, image, audio, resource links, embedded resources),
// resource contents, prompt messages. Text stays text; images and audio play from data: URLs checked by dataUrl.
import { base64Bytes, dataUrl, downloadButton, formatBytes, h, hexPreview, jsonView } from "./dom.js";

export function contentsView(item, actions = {}) {
  // one resource contents entry: {uri, mimeType?, text} or {uri, mimeType?, blob}
  const box = h("div", { class: "content-block" });
  const head = h("div", { class: "kind" }, item.mimeType ? `${item.mimeType} · ` : "", item.uri || "");
  box.append(head);
  if (typeof item.text === "string") {
    box.append(h("pre", { class: "text", text: item.text }));
  } else if (typeof item.blob === "string") {
    const bytes = base64Bytes(item.blob);
    if (!bytes) {
      box.append(h("p", { class: "err", text: "the blob is not valid base64" }));
      return box;
    }
    box.append(h("p", {}, `binary, ${formatBytes(bytes.length)}: `, h("code", { text: hexPreview(bytes) })));
    const img = String(item.mimeType || "").startsWith("image/") ? dataUrl("image", item.mimeType, item.blob) : null;
    if (img) box.append(h("img", { src: img, alt: `image ${item.uri || ""}` }));
    const audio = String(item.mimeType || "").startsWith("audio/") ? dataUrl("audio", item.mimeType, item.blob) : null;
    if (audio) box.append(h("audio", { controls: true, src: audio, "aria-label": `audio ${item.uri || ""}` }));
    box.append(h("div", { class: "actions" }, downloadButton(bytes, (item.uri || "resource").split("/").pop())));
  } else {
    box.append(jsonView(item));
  }
  return box;
}

export function blockView(block, actions = {}) {
  const type = block && typeof block === "object" ? block.type : undefined;
  const box = h("div", { class: `content-block block-${String(type || "unknown").replace(/[^a-z_]/gi, "")}` });
  if (type === "text") {
    box.append(h("pre", { class: "text", text: String(block.text ?? "") }));
  } else if (type === "image") {
    const src = dataUrl("image", block.mimeType, block.data);
    const size = base64Bytes(block.data)?.length ?? 0;
    box.append(h("div", { class: "kind", text: `image · ${block.mimeType || "?"} · ${formatBytes(size)}` }));
    if (src) box.append(h("img", { src, alt: `image from the server (${block.mimeType}, ${formatBytes(size)})` }));
    else box.append(h("p", { class: "err", text: "not shown: the MIME type or the data is not a valid image" }));
  } else if (type === "audio") {
    const src = dataUrl("audio", block.mimeType, block.data);
    const size = base64Bytes(block.data)?.length ?? 0;
    box.append(h("div", { class: "kind", text: `audio · ${block.mimeType || "?"} · ${formatBytes(size)}` }));
    if (src) box.append(h("audio", { controls: true, src, "aria-label": `audio from the server (${block.mimeType})` }));
    else box.append(h("p", { class: "err", text: "not played: the MIME type or the data is not valid audio" }));
  } else if (type === "resource_link") {
    box.append(
      h("div", { class: "kind", text: "resource link" }),
      h("p", {}, h("strong", { text: block.title || block.name || "" }), " ", h("code", { text: block.uri || "" })),
    );
    if (block.description) box.append(h("p", { class: "muted", text: block.description }));
    if (actions.read && typeof block.uri === "string") {
      box.append(h("button", { type: "button", class: "secondary", text: "Read it", onclick: () => actions.read(block.uri) }));
    }
  } else if (type === "resource") {
    box.append(h("div", { class: "kind", text: "embedded resource" }), contentsView(block.resource || {}, actions));
  } else {
    box.append(h("div", { class: "kind", text: `content of type ${String(type)}` }), jsonView(block));
  }
  return box;
}

export function blocksView(blocks, actions) {
  return h("div", { class: "blocks" }, (Array.isArray(blocks) ? blocks : []).map((b) => blockView(b, actions)));
}

export function messagesView(messages, actions) {
  return h(
    "div",
    { class: "messages" },
    (Array.isArray(messages) ? messages : []).map((m) =>
      h(
        "div",
        { class: "msg" },
        h("div", { class: "kind", text: String(m.role || "?") }),
        Array.isArray(m.content) ? blocksView(m.content, actions) : blockView(m.content, actions),
      ),
    ),
  );
}
