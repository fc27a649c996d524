#!/usr/bin/env node
// MCP "everything" test server built on the official TypeScript SDK v2 (@modelcontextprotocol/server 2.x).
// Serves both eras from one factory: 2026-07-28 (server/discover, per-request envelope,
// input_required round trips, subscriptions/listen) and the 2025 handshake era (the SDK's legacy
// shim turns input_required into real server->client requests).
// stdio by default (serveStdio); --http [--port N] serves http://127.0.0.1:N/mcp through
// createMcpHandler (modern per-request; legacy traffic stateless by default, or
// --legacy sessionful for a sessionful 2025 Streamable HTTP leg, or --legacy reject).
// See README.md in this directory.
import * as z from 'zod';
import { completable, createMcpHandler, inputRequired, inputResponse, isLegacyRequest, McpServer, ProtocolError, ResourceTemplate, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { ASK_NAME_SCHEMA, LOG_LEVELS, serverArgs, SERVER_INSTRUCTIONS, SESSION_NOT_FOUND, serveHttp, sessionTransport, stopOnSignals } from './_fixtures.mjs';
import { registerSurface, text } from './_surface.mjs';

const opts = serverArgs(process.argv.slice(2), 'usage: ts_server_v2.mjs [--stdio | --http [--port N] [--host H] [--path /mcp] [--legacy stateless|sessionful|reject] [--json-response]]');

/** Live legacy instances (stdio, or sessionful HTTP) for resources/updated fan-out: {mcp, subscriptions}. */
const liveLegacy = new Set();
/** Tools added at run time by add_tool; every new instance registers them too. */
const dynamicTools = new Set();
/** Set once the HTTP handler exists: publishes onto subscriptions/listen streams. */
let httpNotify;
/** stdio instances (either era): change notifications route through their channel. */
const stdioInstances = new Set();

function registerDynamic(mcp, name) {
    try {
        mcp.registerTool(name, { description: `dynamic tool ${name}` }, async () => text(`I am ${name}`));
        return true;
    } catch {
        return false; // already registered on this instance
    }
}

async function announceToolsChanged(origin, name) {
    httpNotify?.toolsChanged();
    // Other live instances (sessionful legacy HTTP) learn the tool too; McpServer then emits
    // notifications/tools/list_changed on their connection.
    for (const e of [...liveLegacy, ...stdioInstances]) if (e.mcp !== origin) registerDynamic(e.mcp, name);
}

async function announceResourceUpdated(uri) {
    httpNotify?.resourceUpdated(uri);
    for (const e of stdioInstances) {
        // Legacy stdio honours resources/subscribe; on a modern stdio connection the entry
        // rewrites this notification onto the matching subscriptions/listen streams.
        if (e.era === 'modern' || e.subscriptions.has(uri)) await e.mcp.server.sendResourceUpdated({ uri }).catch(() => {});
    }
    for (const e of liveLegacy) {
        if (!stdioInstances.has(e) && e.subscriptions.has(uri)) await e.mcp.server.sendResourceUpdated({ uri }).catch(() => {});
    }
}

/** What _surface.mjs needs of SDK v2, and the tools this server writes its own way. sample / ask_name / roots are
 *  written once as multi-round-trip handlers: on 2026-07-28 the client fulfils input_required; on the 2025 era the
 *  SDK's shim sends real requests. */
const SDK = {
    schema: (shape) => z.object(shape),
    ResourceTemplate,
    optionalCompletable: (complete) => completable(z.string(), complete).optional(),
    call: (ctx) => ({ signal: ctx.mcpReq.signal, progressToken: ctx.mcpReq._meta?.progressToken, notify: (n) => ctx.mcpReq.notify(n) }),
    cancelled: () => new ProtocolError(-32603, 'cancelled'),
    resourceUpdated: announceResourceUpdated,
    listResources(mcp, page) {
        mcp.server.setRequestHandler('resources/list', async (req) => {
            try {
                return page(req.params?.cursor);
            } catch (e) {
                throw new ProtocolError(-32602, e.message);
            }
        });
    },
    ownTools: (mcp) => ({
        sample: [
            { description: "Ask the client's LLM (sampling/createMessage)", inputSchema: z.object({ prompt: z.string() }) },
            async ({ prompt }, ctx) => {
                const r = inputResponse(ctx.mcpReq.inputResponses, 'sample');
                if (r.kind === 'sampling') {
                    const c = r.result.content;
                    return text(c?.type === 'text' ? c.text : JSON.stringify(c));
                }
                return inputRequired({
                    inputRequests: { sample: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 }) }
                });
            }
        ],
        ask_name: [
            { description: 'Elicit {name} from the user' },
            async (ctx) => {
                const r = inputResponse(ctx.mcpReq.inputResponses, 'name');
                if (r.kind === 'elicit') {
                    if (r.action === 'accept' && r.content?.name !== undefined) return text(`Hello, ${r.content.name}!`);
                    return text(`elicitation ${r.action}`);
                }
                return inputRequired({ inputRequests: { name: inputRequired.elicit({ message: 'What is your name?', requestedSchema: ASK_NAME_SCHEMA }) } });
            }
        ],
        roots: [
            { description: "List the client's roots" },
            async (ctx) => {
                const r = inputResponse(ctx.mcpReq.inputResponses, 'roots');
                if (r.kind === 'roots') return text(JSON.stringify(r.roots));
                return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
            }
        ],
        add_tool: [
            { description: 'Register a tool at run time (tools/list_changed)', inputSchema: z.object({ name: z.string() }) },
            async ({ name }) => {
                if (dynamicTools.has(name)) return text(`exists ${name}`);
                dynamicTools.add(name);
                registerDynamic(mcp, name); // McpServer emits notifications/tools/list_changed for this instance
                await announceToolsChanged(mcp, name);
                return text(`added ${name}`);
            }
        ],
        log: [
            {
                description: 'Emit a log message (notifications/message), honouring the requested log level',
                inputSchema: z.object({ level: z.enum(LOG_LEVELS).default('info'), message: z.string() })
            },
            async ({ level, message }, ctx) => {
                await ctx.mcpReq.log(level, message, 'ts-server-v2');
                return text(`logged ${level}`);
            }
        ]
    })
};

function buildServer(era) {
    const mcp = new McpServer(
        { name: 'ts-interop-server-v2', version: '2.4' },
        {
            capabilities: {
                logging: {},
                completions: {},
                resources: { subscribe: true, listChanged: true },
                tools: { listChanged: true },
                prompts: { listChanged: true }
            },
            instructions: SERVER_INSTRUCTIONS
        }
    );
    const entry = { mcp, era, subscriptions: new Set() };
    registerSurface(mcp, SDK);
    for (const name of dynamicTools) registerDynamic(mcp, name);
    if (era === 'legacy') {
        mcp.server.setRequestHandler('resources/subscribe', async (req) => {
            entry.subscriptions.add(req.params.uri);
            return {};
        });
        mcp.server.setRequestHandler('resources/unsubscribe', async (req) => {
            entry.subscriptions.delete(req.params.uri);
            return {};
        });
    }
    return entry;
}

// ---- node:http <-> fetch bridge (the SDK's HTTP entry is web-standard Request -> Response) ----
async function toWebRequest(req, res) {
    const chunks = [];
    if (req.method !== 'GET' && req.method !== 'HEAD') for await (const c of req) chunks.push(c);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
        if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
        else if (v !== undefined) headers.set(k, v);
    }
    const ac = new AbortController();
    res.on('close', () => ac.abort());
    return new Request(`http://${req.headers.host ?? `${opts.host}:${opts.port}`}${req.url}`, {
        method: req.method,
        headers,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
        signal: ac.signal,
        duplex: 'half'
    });
}

async function sendWebResponse(res, response) {
    const headers = {};
    response.headers.forEach((v, k) => (headers[k] = v));
    res.writeHead(response.status, headers);
    if (!response.body) {
        res.end();
        return;
    }
    // the status line now, not with the first chunk: a GET stream's answer is its status line (the SDK's own node
    // adapter flushes it too), and a client may wait for it before it goes on
    res.flushHeaders();
    const reader = response.body.getReader();
    res.on('close', () => reader.cancel().catch(() => {}));
    try {
        for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            res.write(value);
        }
    } catch {
        /* client went away */
    }
    res.end();
}

if (!opts.http) {
    serveStdio(async ({ era }) => {
        const entry = buildServer(era);
        stdioInstances.add(entry);
        entry.mcp.server.onclose = () => stdioInstances.delete(entry);
        return entry.mcp;
    }, { onerror: (e) => process.stderr.write(`serveStdio: ${e?.message ?? e}\n`) });
} else {
    const legacyMode = opts.legacy ?? 'stateless';
    const handler = createMcpHandler(async ({ era }) => buildServer(era).mcp, {
        legacy: legacyMode === 'stateless' ? 'stateless' : 'reject',
        responseMode: opts.json ? 'json' : 'auto',
        onerror: (e) => process.stderr.write(`mcp handler: ${e?.message ?? e}\n`)
    });
    httpNotify = handler.notify;

    // Optional sessionful 2025 leg, routed with the SDK's own classifier.
    const sessions = new Map();
    async function sessionfulLegacy(request) {
        const transport = await sessionTransport(sessions, request.headers.get('mcp-session-id'), WebStandardStreamableHTTPServerTransport, opts.json, async (t) => {
            const entry = buildServer('legacy');
            liveLegacy.add(entry);
            await entry.mcp.connect(t);
            return () => liveLegacy.delete(entry);
        });
        return transport ? transport.handleRequest(request) : Response.json(SESSION_NOT_FOUND, { status: 404 });
    }

    const http = serveHttp(opts, [opts.path], async (req, res) => {
        const request = await toWebRequest(req, res);
        let response;
        if (legacyMode === 'sessionful' && (await isLegacyRequest(request))) response = await sessionfulLegacy(request);
        else response = await handler.fetch(request);
        await sendWebResponse(res, response);
    });
    stopOnSignals(http, sessions, () => handler.close());
}
