#!/usr/bin/env node
// Contender: the official TypeScript SDK v2 (@modelcontextprotocol/server 2.x) McpServer, through its public API,
// with the same command line as every other bench server (servers/_serve.py):
//
//     node ts_v2_server.mjs                       stdio (serveStdio: either era, per connection)
//     node ts_v2_server.mjs http PORT             Streamable HTTP at http://127.0.0.1:PORT/mcp, JSON responses:
//                                                 2025 traffic sessionful (one NodeStreamableHTTPServerTransport
//                                                 and McpServer per session, the SDK's documented pattern),
//                                                 2026-07-28 traffic through createMcpHandler (per request)
//     node ts_v2_server.mjs http PORT stateless   createMcpHandler for both eras (2025 traffic stateless)
//
// The same tools as servers/_growth.py describes: echo(text), add(a, b), BENCH_TOOLS extra tools t0.. taking one
// string, BENCH_RESOURCES static text resources bench://r/0.., and sleep50 with BENCH_SLOW_TOOL=1.
// The packages come from tests/node_modules (the pinned npm peers), or BENCH_NODE_MODULES.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';

const NM = process.env.BENCH_NODE_MODULES ?? new URL('../../tests/node_modules/', import.meta.url).pathname;
const load = (rel) => import(pathToFileURL(`${NM}/${rel}`).href);
const z = await load('zod/index.js');
const { McpServer, createMcpHandler } = await load('@modelcontextprotocol/server/dist/index.mjs');
const { serveStdio } = await load('@modelcontextprotocol/server/dist/stdio.mjs');
const { NodeStreamableHTTPServerTransport, toNodeHandler } = await load('@modelcontextprotocol/node/dist/index.mjs');

const EXTRA_TOOLS = Number(process.env.BENCH_TOOLS || 0);
const EXTRA_RESOURCES = Number(process.env.BENCH_RESOURCES || 0);
const SLOW_TOOL = process.env.BENCH_SLOW_TOOL === '1';
const PROTOCOL_VERSION_META = 'io.modelcontextprotocol/protocolVersion';

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const extraSchema = z.object({ text: z.string() });

function build() {
    const mcp = new McpServer({ name: 'bench', version: '1' });
    mcp.registerTool('echo', { inputSchema: z.object({ text: z.string() }) }, async ({ text: t }) => text(t));
    mcp.registerTool(
        'add',
        { inputSchema: z.object({ a: z.number().int(), b: z.number().int() }), outputSchema: z.object({ result: z.number().int() }) },
        async ({ a, b }) => ({ ...text(String(a + b)), structuredContent: { result: a + b } })
    );
    if (SLOW_TOOL) {
        mcp.registerTool('sleep50', {}, async () => {
            await new Promise((resolve) => setTimeout(resolve, 50));
            return text('ok');
        });
    }
    for (let i = 0; i < EXTRA_TOOLS; i++) {
        mcp.registerTool(`t${i}`, { description: 'A registry-size tool.', inputSchema: extraSchema }, async ({ text: t }) => text(t));
    }
    for (let i = 0; i < EXTRA_RESOURCES; i++) {
        const uri = `bench://r/${i}`;
        mcp.registerResource(`r${i}`, uri, { mimeType: 'text/plain' }, async () => ({ contents: [{ uri, mimeType: 'text/plain', text: 'x' }] }));
    }
    return mcp;
}

const [mode = 'stdio', port, flag] = process.argv.slice(2);
if (mode === 'stdio') {
    // one McpServer per connection (the registry is built once: one connection per process here)
    serveStdio(async () => build(), { onerror: (e) => process.stderr.write(`serveStdio: ${e?.message ?? e}\n`) });
} else if (mode === 'http' && port) {
    const stateless = flag === 'stateless';
    const onerror = (e) => process.stderr.write(`mcp handler: ${e?.message ?? e}\n`);
    const perRequest = toNodeHandler(
        createMcpHandler(async () => build(), { legacy: stateless ? 'stateless' : 'reject', responseMode: 'json', onerror })
    );
    const sessions = new Map();

    async function readJson(req) {
        const chunks = [];
        for await (const c of req) chunks.push(c);
        return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    }

    async function sessionful(req, res, body) {
        const sid = req.headers['mcp-session-id'];
        let transport = sid ? sessions.get(sid) : undefined;
        if (!transport) {
            if (sid) {
                res.writeHead(404, { 'content-type': 'application/json' });
                res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
                return;
            }
            transport = new NodeStreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                enableJsonResponse: true,
                onsessioninitialized: (id) => sessions.set(id, transport)
            });
            transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
            await build().connect(transport);
        }
        await transport.handleRequest(req, res, body);
    }

    const http = createServer(async (req, res) => {
        try {
            if (!req.url.startsWith('/mcp')) {
                res.writeHead(404).end('not found');
                return;
            }
            const body = req.method === 'POST' ? await readJson(req) : undefined;
            // 2026-07-28 requests carry the protocol version in their _meta envelope; everything else is 2025 traffic
            const modern = body?.params?._meta?.[PROTOCOL_VERSION_META] !== undefined;
            if (stateless || modern) await perRequest(req, res, body);
            else await sessionful(req, res, body);
        } catch (e) {
            process.stderr.write(`http error: ${e?.stack ?? e}\n`);
            if (!res.headersSent) res.writeHead(500).end(String(e));
        }
    });
    http.keepAliveTimeout = 120_000;
    http.listen(Number(port), '127.0.0.1');
    const stop = () => {
        http.close();
        process.exit(0);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
} else {
    process.stderr.write('usage: ts_v2_server.mjs [stdio | http PORT [stateless]]\n');
    process.exit(2);
}
