// The view's own code. `ExtApps` holds the exports of the official App SDK bundle (see build_sdk_view.py).
const { App, PostMessageTransport } = ExtApps;
const $ = (id) => document.getElementById(id);
let name = "clicks";

const app = new App({ name: "counter-view", version: "1.0.0" }, { availableDisplayModes: ["inline"] });

function show(result) {
  const data = (result && result.structuredContent) || {};
  if (typeof data.name === "string") name = data.name;
  $("name").textContent = name;
  $("count").textContent = data.count === undefined ? "?" : String(data.count);
}

app.addEventListener("toolinput", (params) => {
  if (params && params.arguments && typeof params.arguments.name === "string") name = params.arguments.name;
  $("name").textContent = name;
});
app.addEventListener("toolresult", show);
app.addEventListener("toolcancelled", () => ($("count").textContent = "cancelled"));

$("increment").addEventListener("click", async () => {
  $("status").textContent = "adding…";
  try {
    // "increment" is an app-only tool (visibility ["app"]): the model never sees it, this button calls it
    show(await app.callServerTool({ name: "increment", arguments: { name } }));
    $("status").textContent = "incremented by the view";
  } catch (e) {
    $("status").textContent = `failed: ${e.message}`;
  }
});

app.connect(new PostMessageTransport(window.parent, window.parent)).then(
  () => ($("status").textContent = "connected"),
  (e) => ($("status").textContent = `connect failed: ${e.message}`),
);
