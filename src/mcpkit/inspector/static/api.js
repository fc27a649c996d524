// The inspector's API, as the page calls it: POST /api/<action> (JSON) with the run's token, which the page takes once
// from the fragment of the URL it was opened with and keeps in the tab's session storage.

function takeToken() {
  const hash = new URLSearchParams(location.hash.replace(/^#/, ""));
  const fromUrl = hash.get("token");
  if (fromUrl) {
    sessionStorage.setItem("mcpkit-inspector-token", fromUrl);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("mcpkit-inspector-token") || "";
}

export const TOKEN = takeToken();

export async function api(action, body = {}) {
  let resp;
  try {
    resp = await fetch(`/api/${action}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    return { error: { message: `the inspector does not answer (${e.message}); is mcpkit still running?` } };
  }
  let data = {};
  try {
    data = await resp.json();
  } catch (e) {
    data = { error: { message: `HTTP ${resp.status}` } };
  }
  if (!resp.ok && !data.error) data.error = { message: `HTTP ${resp.status}` };
  return data;
}

export function errorText(error) {
  if (!error) return "";
  const code = error.code !== undefined && error.code !== null ? ` (${error.code})` : "";
  return `${error.message || "error"}${code}`;
}
