import express from 'express';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { z } from 'zod';
const app = express();
app.use(express.json());
const transports = {};
function build() {
  const server = new McpServer({ name: 'ts-sse', version: '1.0.0' });
  server.tool('add', { a: z.number(), b: z.number() }, async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
  server.tool('ask', {}, async (_args, extra) => {
    const r = await server.server.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: '2+2' } }], maxTokens: 5 });
    const e = await server.server.elicitInput({ message: 'name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } });
    const roots = await server.server.listRoots();
    return { content: [{ type: 'text', text: `${r.content.text}|${e.action}:${e.content?.name}|${roots.roots.map(x => x.uri).join(',')}` }] };
  });
  server.tool('prog', {}, async (_args, extra) => {
    const tok = extra._meta?.progressToken;
    for (let i = 1; i <= 3; i++) if (tok !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: tok, progress: i, total: 3 } });
    await server.server.sendLoggingMessage({ level: 'info', data: 'hi from ts' });
    return { content: [{ type: 'text', text: 'done' }] };
  });
  server.tool('sleepy', { s: z.number() }, async ({ s }, extra) => {
    await new Promise((res, rej) => { const t = setTimeout(res, s * 1000); extra.signal.addEventListener('abort', () => { clearTimeout(t); console.error('ABORTED'); rej(new Error('aborted')); }); });
    return { content: [{ type: 'text', text: 'slept' }] };
  });
  return server;
}
app.get('/sse', async (req, res) => {
  const t = new SSEServerTransport('/messages', res);
  transports[t.sessionId] = t;
  res.on('close', () => delete transports[t.sessionId]);
  await build().connect(t);
});
app.post('/messages', async (req, res) => {
  const t = transports[req.query.sessionId];
  if (!t) return res.status(400).send('no session');
  await t.handlePostMessage(req, res, req.body);
});
const srv = app.listen(0, '127.0.0.1', () => console.log(srv.address().port));
