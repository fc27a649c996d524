#!/usr/bin/env node
// MCP "everything" test server built on the official TypeScript SDK 1.x (@modelcontextprotocol/sdk,
// handshake era, protocol up to 2025-11-25). stdio by default; --http [--port N] serves Streamable
// HTTP at http://127.0.0.1:N/mcp (sessionful; --stateless for no sessions; --json-response for JSON
// bodies instead of SSE); --sse serves the legacy HTTP+SSE transport (2024-11-05: GET /sse, POST
// /messages?sessionId=...). See README.md in this directory.
import * as z from 'zod';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CreateMessageResultSchema, ElicitResultSchema, ErrorCode, isInitializeRequest, ListResourcesRequestSchema, ListRootsResultSchema, McpError, SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { ASK_NAME_SCHEMA, LOG_LEVELS, readJsonBody, serverArgs, SERVER_INSTRUCTIONS, SESSION_NOT_FOUND, serveHttp, sessionTransport, stopOnSignals } from './_fixtures.mjs';
import { registerSurface, text } from './_surface.mjs';

const opts = serverArgs(process.argv.slice(2), 'usage: ts_server.mjs [--stdio | --sse [--port N] | --http [--port N] [--host H] [--path /mcp] [--stateless] [--json-response]]');

/** Every live McpServer (one per session over HTTP), for resource-updated fan-out. */
const live = new Set();

/** What _surface.mjs needs of SDK 1.x, and the tools this server writes its own way. */
const SDK = {
    schema: (shape) => shape,
    ResourceTemplate,
    optionalCompletable: (complete) => completable(z.string().optional(), complete),
    call: (extra) => ({ signal: extra.signal, progressToken: extra._meta?.progressToken, notify: (n) => extra.sendNotification(n) }),
    cancelled: () => new McpError(ErrorCode.RequestTimeout, 'cancelled'),
    async resourceUpdated(uri) {
        for (const e of live) {
            if (e.subscriptions.has(uri)) await e.mcp.server.sendResourceUpdated({ uri }).catch(() => {});
        }
    },
    listResources(mcp, page) {
        // page throws an Error carrying code -32602; a plain Error keeps the message unprefixed on the wire (McpError
        // would prepend "MCP error -32602: " to it).
        mcp.server.setRequestHandler(ListResourcesRequestSchema, async (req) => page(req.params?.cursor));
    },
    ownTools: (mcp) => ({
        sample: [
            { description: "Ask the client's LLM (sampling/createMessage)", inputSchema: { prompt: z.string() } },
            async ({ prompt }, extra) => {
                const r = await extra.sendRequest(
                    {
                        method: 'sampling/createMessage',
                        params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 }
                    },
                    CreateMessageResultSchema
                );
                return text(r.content?.type === 'text' ? r.content.text : JSON.stringify(r.content));
            }
        ],
        ask_name: [
            { description: 'Elicit {name} from the user' },
            async (extra) => {
                const r = await extra.sendRequest(
                    { method: 'elicitation/create', params: { mode: 'form', message: 'What is your name?', requestedSchema: ASK_NAME_SCHEMA } },
                    ElicitResultSchema
                );
                if (r.action === 'accept' && r.content?.name !== undefined) return text(`Hello, ${r.content.name}!`);
                return text(`elicitation ${r.action}`);
            }
        ],
        roots: [
            { description: "List the client's roots" },
            async (extra) => text(JSON.stringify((await extra.sendRequest({ method: 'roots/list' }, ListRootsResultSchema)).roots))
        ],
        add_tool: [
            { description: 'Register a tool at run time on this session (tools/list_changed)', inputSchema: { name: z.string() } },
            async ({ name }) => {
                try {
                    mcp.registerTool(name, { description: `dynamic tool ${name}` }, async () => text(`I am ${name}`));
                } catch {
                    return text(`exists ${name}`);
                }
                return text(`added ${name}`);
            }
        ],
        log: [
            {
                description: 'Emit a log message (notifications/message), honouring logging/setLevel',
                inputSchema: { level: z.enum(LOG_LEVELS).default('info'), message: z.string() }
            },
            async ({ level, message }, extra) => {
                if (!mcp.server.isMessageIgnored?.(level, extra.sessionId)) {
                    await extra.sendNotification({ method: 'notifications/message', params: { level, logger: 'ts-server', data: message } });
                }
                return text(`logged ${level}`);
            }
        ]
    })
};

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
    registerSurface(mcp, SDK);
    mcp.server.setRequestHandler(SubscribeRequestSchema, async (req) => {
        subscriptions.add(req.params.uri);
        return {};
    });
    mcp.server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
        subscriptions.delete(req.params.uri);
        return {};
    });
    mcp.server.onclose = () => live.delete(entry);
    live.add(entry);
    return mcp;
}

if (!opts.http) {
    const mcp = buildServer();
    await mcp.connect(new StdioServerTransport());
} else if (opts.sse) {
    const streams = new Map();
    const http = serveHttp(opts, ['/sse', '/messages'], async (req, res, url) => {
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
    });
    stopOnSignals(http, streams);
} else {
    const transports = new Map();
    const http = serveHttp(opts, [opts.path], async (req, res) => {
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
        if (!sid && (req.method !== 'POST' || !isInitializeRequest(body))) {
            res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: no valid session id' }, id: null }));
            return;
        }
        const transport = await sessionTransport(transports, sid, StreamableHTTPServerTransport, opts.json, (t) => buildServer().connect(t));
        if (!transport) res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify(SESSION_NOT_FOUND));
        else await transport.handleRequest(req, res, body);
    });
    stopOnSignals(http, transports);
}
