// What the page knows: the inspector's state, the lists, the calls, the log and the server's lines, always current
// (draw.js shows what the events changed of it once per frame).

export const S = {
  state: null,
  lists: { tools: [], resources: [], templates: [], prompts: [] },
  cursors: { tools: null, resources: null, templates: null, prompts: null },
  pages: { tools: 0, resources: 0, templates: 0, prompts: 0 },
  selected: { tool: null, resource: null, template: null, prompt: null },
  calls: new Map(),
  asks: new Map(),
  log: [],
  updated: new Map(),
  serverLog: [],
  stderr: [],
  serverLogSeq: 0, // the number of the last log message and stderr line taken in (see "serverlog" in app.js onEvent)
  stderrSeq: 0,
  connectedOnce: false,
};

export function caps() {
  return (S.state && S.state.capabilities) || {};
}

export function connected() {
  return S.state && S.state.status === "connected";
}
