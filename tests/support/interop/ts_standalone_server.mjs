#!/usr/bin/env node
// A sessionful Streamable HTTP server on the official TypeScript SDK 1.x (@modelcontextprotocol/sdk) whose own
// requests travel on the standalone GET stream only, as the conformance suite's elicitation scenarios send them:
// its tool `ask` sends elicitation/create without tying it to the call, so the SDK writes it on the session's GET
// stream, and drops it when no GET stream is open. `ask` answers `accepted: <the content as JSON>`, or
// `refused: <the SDK's error>` with isError (e.g. once the session closed). When the client declares `roots`, the
// server asks for them (roots/list, tied to nothing: on the GET stream only) as soon as the client's
// notifications/initialized arrives, in the SDK's `oninitialized`; its tool `initial_roots` answers
// `answered: <the roots' URIs as JSON>` once the client answered, or `lost: <the SDK's error>` with isError when
// no answer came within --roots-timeout-ms (default 3000: the request was dropped, no GET stream being open).
//
//     node ts_standalone_server.mjs [--port N] [--get-delay-ms N] [--roots-timeout-ms N] [--strict-get]
//
// --strict-get answers 400 to a GET that comes before the session's notifications/initialized (a server stricter
// than the spec: the GET is no JSON-RPC message, the lifecycle does not order it).
//
// --get-delay-ms holds each GET that long before the SDK sees it: the stream is open only after it (a loaded
// machine's late GET, made certain). Prints {"listening": url, "port": n} on stdout once it listens (127.0.0.1).
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ElicitResultSchema, isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { announce, readJsonBody, stopOnSignals } from './_fixtures.mjs';

let port = 0;
let getDelay = 0;
let rootsTimeout = 3000;
let strictGet = false;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--port') port = Number(argv[++i]);
    else if (argv[i] === '--get-delay-ms') getDelay = Number(argv[++i]);
    else if (argv[i] === '--roots-timeout-ms') rootsTimeout = Number(argv[++i]);
    else if (argv[i] === '--strict-get') strictGet = true;
    else throw new Error(`unknown argument: ${argv[i]}`);
}

function buildServer(session) {
    const mcp = new McpServer({ name: 'ts-standalone', version: '1.0.0' });
    mcp.registerTool('ask', { description: 'Elicit a name on the standalone GET stream' }, async () => {
        try {
            // mcp.server.request, not extra.sendRequest: the request is not related to the call (no
            // relatedRequestId), so the transport sends it on the standalone stream
            const r = await mcp.server.request(
                {
                    method: 'elicitation/create',
                    params: { message: 'Your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } }
                },
                ElicitResultSchema,
                { timeout: 20000 }
            );
            return { content: [{ type: 'text', text: `accepted: ${JSON.stringify(r.content ?? null)}` }] };
        } catch (e) {
            return { content: [{ type: 'text', text: `refused: ${e.message}` }], isError: true };
        }
    });
    let initialRoots;
    mcp.server.oninitialized = () => {
        session.initialized = true;
        if (!mcp.server.getClientCapabilities()?.roots) return;
        initialRoots = mcp.server
            .listRoots(undefined, { timeout: rootsTimeout })
            .then((r) => ({ content: [{ type: 'text', text: `answered: ${JSON.stringify(r.roots.map((x) => x.uri))}` }] }))
            .catch((e) => ({ content: [{ type: 'text', text: `lost: ${e.message}` }], isError: true }));
    };
    mcp.registerTool('initial_roots', { description: 'What became of the roots/list sent on initialized' }, async () => {
        if (initialRoots === undefined) return { content: [{ type: 'text', text: 'lost: never asked' }], isError: true };
        return await initialRoots;
    });
    return mcp;
}

const transports = new Map();
const http = createServer(async (req, res) => {
    try {
        const body = req.method === 'POST' ? await readJsonBody(req) : undefined;
        if (req.method === 'GET' && getDelay > 0) await new Promise((resolve) => setTimeout(resolve, getDelay));
        const sid = req.headers['mcp-session-id'];
        let transport = sid ? transports.get(sid) : undefined;
        if (transport && req.method === 'GET' && strictGet && !transport.session.initialized) {
            res.writeHead(400, { 'content-type': 'application/json' }).end(
                JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Bad Request: not initialized' } })
            );
            return;
        }
        if (!transport) {
            if (sid || req.method !== 'POST' || !isInitializeRequest(body)) {
                res.writeHead(sid ? 404 : 400).end();
                return;
            }
            transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                onsessioninitialized: (id) => transports.set(id, transport)
            });
            transport.onclose = () => transports.delete(transport.sessionId);
            transport.session = { initialized: false };
            await buildServer(transport.session).connect(transport);
        }
        await transport.handleRequest(req, res, body);
    } catch (e) {
        process.stderr.write(`http error: ${e?.stack ?? e}\n`);
        if (!res.headersSent) res.writeHead(500).end(String(e));
    }
});
http.listen(port, '127.0.0.1', () => announce(http, '/mcp'));
stopOnSignals(http, transports);
