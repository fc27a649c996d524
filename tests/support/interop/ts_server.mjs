#!/usr/bin/env node
// MCP "everything" test server built on the official TypeScript SDK 1.x (@modelcontextprotocol/sdk,
// handshake era, protocol up to 2025-11-25). stdio by default; --http [--port N] serves Streamable
// HTTP at http://127.0.0.1:N/mcp (sessionful; --stateless for no sessions; --json-response for JSON
// bodies instead of SSE); --sse serves the legacy HTTP+SSE transport (2024-11-05: GET /sse, POST
// /messages?sessionId=...). See README.md in this directory.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import * as z from 'zod';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
    CreateMessageResultSchema,
    ElicitResultSchema,
    ErrorCode,
    isInitializeRequest,
    ListResourcesRequestSchema,
    ListRootsResultSchema,
    McpError,
    SubscribeRequestSchema,
    UnsubscribeRequestSchema
} from '@modelcontextprotocol/sdk/types.js';
import {
    announce,
    ASK_NAME_SCHEMA,
    completeFrom,
    COUNTER_URI,
    GREET_STYLES,
    greetText,
    ITEM_IDS,
    ITEM_TEMPLATE,
    LOG_LEVELS,
    PNG_1X1,
    readJsonBody,
    serverArgs,
    SERVER_INSTRUCTIONS,
    STATIC_COUNT,
    staticContents,
    staticPage,
    staticUri,
    state,
    stopOnSignals
} from './_fixtures.mjs';

const opts = serverArgs(process.argv.slice(2));
if (opts.help) {
    process.stderr.write('usage: ts_server.mjs [--stdio | --sse [--port N] | --http [--port N] [--host H] [--path /mcp] [--stateless] [--json-response]]\n');
    process.exit(0);
}

/** Every live McpServer (one per session over HTTP), for resource-updated fan-out. */
const live = new Set();

function text(t) {
    return { content: [{ type: 'text', text: t }] };
}

function buildServer() {
    const mcp = new McpServer(
        { name: 'ts-interop-server', version: '1.32' },
        {
            capabilities: { logging: {}, resources: { subscribe: true, listChanged: true }, tools: { listChanged: true }, prompts: { listChanged: true } },
            instructions: SERVER_INSTRUCTIONS
        }
    );
    const subscriptions = new Set();
    const entry = { mcp, subscriptions };

    // ---- tools ----
    mcp.registerTool('echo', { description: 'Echo the text back', inputSchema: { text: z.string() } }, async ({ text: t }) => text(t));

    mcp.registerTool(
        'add',
        {
            description: 'Add two integers',
            inputSchema: { a: z.number().int(), b: z.number().int() },
            outputSchema: { result: z.number().int() }
        },
        async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }], structuredContent: { result: a + b } })
    );

    mcp.registerTool(
        'slow',
        {
            description: 'Sleep steps x delay_ms, reporting progress when asked; stops when cancelled',
            inputSchema: { steps: z.number().int().min(0).default(5), delay_ms: z.number().int().min(0).default(100) }
        },
        async ({ steps, delay_ms }, extra) => {
            const token = extra._meta?.progressToken;
            for (let i = 1; i <= steps; i++) {
                await new Promise((resolve) => {
                    const t = setTimeout(resolve, delay_ms);
                    extra.signal.addEventListener('abort', () => {
                        clearTimeout(t);
                        resolve();
                    }, { once: true });
                });
                if (extra.signal.aborted) {
                    state.cancelledSlow++;
                    process.stderr.write(`slow: cancelled at step ${i}\n`);
                    throw new McpError(ErrorCode.RequestTimeout, 'cancelled');
                }
                if (token !== undefined) {
                    await extra.sendNotification({
                        method: 'notifications/progress',
                        params: { progressToken: token, progress: i, total: steps, message: `step ${i}/${steps}` }
                    });
                }
            }
            state.completedSlow++;
            return text(`done after ${steps} steps`);
        }
    );

    mcp.registerTool('fail', { description: 'Always fails with isError: true' }, async () => ({
        content: [{ type: 'text', text: 'this tool always fails' }],
        isError: true
    }));

    mcp.registerTool('sample', { description: "Ask the client's LLM (sampling/createMessage)", inputSchema: { prompt: z.string() } }, async ({ prompt }, extra) => {
        const r = await extra.sendRequest(
            {
                method: 'sampling/createMessage',
                params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 }
            },
            CreateMessageResultSchema
        );
        const reply = r.content?.type === 'text' ? r.content.text : JSON.stringify(r.content);
        return text(reply);
    });

    mcp.registerTool('ask_name', { description: 'Elicit {name} from the user' }, async (extra) => {
        const r = await extra.sendRequest(
            { method: 'elicitation/create', params: { mode: 'form', message: 'What is your name?', requestedSchema: ASK_NAME_SCHEMA } },
            ElicitResultSchema
        );
        if (r.action === 'accept' && r.content?.name !== undefined) return text(`Hello, ${r.content.name}!`);
        return text(`elicitation ${r.action}`);
    });

    mcp.registerTool('roots', { description: "List the client's roots" }, async (extra) => {
        const r = await extra.sendRequest({ method: 'roots/list' }, ListRootsResultSchema);
        return text(JSON.stringify(r.roots));
    });

    mcp.registerTool('touch', { description: 'Change a subscribable resource (mcpkit://counter)', inputSchema: { uri: z.string().default(COUNTER_URI) } }, async ({ uri }) => {
        state.counter++;
        for (const e of live) {
            if (e.subscriptions.has(uri)) await e.mcp.server.sendResourceUpdated({ uri }).catch(() => {});
        }
        return text(`counter=${state.counter}`);
    });

    mcp.registerTool('add_tool', { description: 'Register a tool at run time on this session (tools/list_changed)', inputSchema: { name: z.string() } }, async ({ name }) => {
        try {
            mcp.registerTool(name, { description: `dynamic tool ${name}` }, async () => text(`I am ${name}`));
        } catch {
            return text(`exists ${name}`);
        }
        return text(`added ${name}`);
    });

    mcp.registerTool(
        'log',
        { description: 'Emit a log message (notifications/message), honouring logging/setLevel', inputSchema: { level: z.enum(LOG_LEVELS).default('info'), message: z.string() } },
        async ({ level, message }, extra) => {
            if (!mcp.server.isMessageIgnored?.(level, extra.sessionId)) {
                await extra.sendNotification({ method: 'notifications/message', params: { level, logger: 'ts-server', data: message } });
            }
            return text(`logged ${level}`);
        }
    );

    mcp.registerTool('image', { description: 'Return a 1x1 PNG' }, async () => ({ content: [{ type: 'image', data: PNG_1X1, mimeType: 'image/png' }] }));

    mcp.registerTool('stats', { description: 'Process-wide counters (slow completed/cancelled, counter)' }, async () => ({
        content: [{ type: 'text', text: JSON.stringify(state) }],
        structuredContent: { ...state }
    }));

    // ---- resources ----
    for (let n = 1; n <= STATIC_COUNT; n++) {
        mcp.registerResource(`static-${n}`, staticUri(n), {}, async () => ({ contents: [staticContents(n)] }));
    }
    mcp.registerResource('counter', COUNTER_URI, { mimeType: 'text/plain', description: 'subscribable; changed by touch' }, async (uri) => ({
        contents: [{ uri: uri.href, mimeType: 'text/plain', text: String(state.counter) }]
    }));
    mcp.registerResource(
        'item',
        new ResourceTemplate(ITEM_TEMPLATE, { list: undefined, complete: { id: (value) => completeFrom(ITEM_IDS, value) } }),
        { mimeType: 'application/json', description: 'JSON item by id' },
        async (uri, { id }) => ({ contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, name: `item ${id}` }) }] })
    );
    // Paginated listing (10 a page) replaces McpServer's single-page list.
    mcp.server.setRequestHandler(ListResourcesRequestSchema, async (req) => {
        // staticPage throws an Error carrying code -32602; a plain Error keeps the message unprefixed
        // on the wire (McpError would prepend "MCP error -32602: " to it).
        return staticPage(req.params?.cursor, [{ uri: COUNTER_URI, name: 'counter', mimeType: 'text/plain' }]);
    });
    mcp.server.setRequestHandler(SubscribeRequestSchema, async (req) => {
        subscriptions.add(req.params.uri);
        return {};
    });
    mcp.server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
        subscriptions.delete(req.params.uri);
        return {};
    });

    // ---- prompts ----
    mcp.registerPrompt('simple', { description: 'A prompt without arguments' }, async () => ({
        messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt.' } }]
    }));
    mcp.registerPrompt(
        'greet',
        {
            description: 'Greet someone; style completes to formal/friendly/funny',
            argsSchema: { name: z.string(), style: completable(z.string().optional(), (value) => completeFrom(GREET_STYLES, value)) }
        },
        async ({ name, style }) => ({ messages: [{ role: 'user', content: { type: 'text', text: greetText(name, style) } }] })
    );
    mcp.registerPrompt('with_resource', { description: 'Embeds static resource n', argsSchema: { n: z.string() } }, async ({ n }) => ({
        messages: [{ role: 'user', content: { type: 'resource', resource: staticContents(Number(n)) } }]
    }));

    mcp.server.onclose = () => live.delete(entry);
    live.add(entry);
    return mcp;
}

if (!opts.http) {
    const mcp = buildServer();
    await mcp.connect(new StdioServerTransport());
} else if (opts.sse) {
    const streams = new Map();
    const http = createServer(async (req, res) => {
        try {
            const url = new URL(req.url, 'http://localhost');
            if (req.method === 'GET' && url.pathname === '/sse') {
                const transport = new SSEServerTransport('/messages', res);
                streams.set(transport.sessionId, transport);
                res.on('close', () => streams.delete(transport.sessionId));
                await buildServer().connect(transport);
            } else if (req.method === 'POST' && url.pathname === '/messages') {
                const transport = streams.get(url.searchParams.get('sessionId'));
                if (!transport) res.writeHead(404).end('Could not find session');
                else await transport.handlePostMessage(req, res);
            } else {
                res.writeHead(404).end('not found');
            }
        } catch (e) {
            process.stderr.write(`http error: ${e?.stack ?? e}\n`);
            if (!res.headersSent) res.writeHead(500).end(String(e));
        }
    });
    http.listen(opts.port, opts.host, () => announce(http, '/sse'));
    stopOnSignals(http, streams);
} else {
    const transports = new Map();
    const http = createServer(async (req, res) => {
        try {
            const url = new URL(req.url, 'http://localhost');
            if (url.pathname !== opts.path) {
                res.writeHead(404).end('not found');
                return;
            }
            const body = req.method === 'POST' ? await readJsonBody(req) : undefined;
            if (opts.stateless) {
                const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: opts.json });
                const mcp = buildServer();
                res.on('close', () => {
                    transport.close();
                    mcp.close();
                });
                await mcp.connect(transport);
                await transport.handleRequest(req, res, body);
                return;
            }
            const sid = req.headers['mcp-session-id'];
            let transport = sid ? transports.get(sid) : undefined;
            if (!transport) {
                if (sid) {
                    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
                    return;
                }
                if (req.method !== 'POST' || !isInitializeRequest(body)) {
                    res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: no valid session id' }, id: null }));
                    return;
                }
                transport = new StreamableHTTPServerTransport({
                    sessionIdGenerator: () => randomUUID(),
                    enableJsonResponse: opts.json,
                    onsessioninitialized: (id) => transports.set(id, transport)
                });
                transport.onclose = () => {
                    if (transport.sessionId) transports.delete(transport.sessionId);
                };
                await buildServer().connect(transport);
            }
            await transport.handleRequest(req, res, body);
        } catch (e) {
            process.stderr.write(`http error: ${e?.stack ?? e}\n`);
            if (!res.headersSent) res.writeHead(500).end(String(e));
        }
    });
    http.listen(opts.port, opts.host, () => announce(http, opts.path));
    stopOnSignals(http, transports);
}
