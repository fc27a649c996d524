import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

// Data shared by ts_server.mjs and ts_server_v2.mjs (no SDK imports): the "everything"
// surface of examples/everything.py, sized for client tests.

export const SERVER_INSTRUCTIONS = 'Interop test server mirroring mcpkit examples/everything.py (tools echo, add, slow, fail, sample, ask_name, roots, touch, add_tool, log, image, stats).';

export const STATIC_COUNT = 100;
export const PAGE_SIZE = 10;
export const ITEM_IDS = Array.from({ length: 20 }, (_, i) => String(i + 1));
export const GREET_STYLES = ['formal', 'friendly', 'funny'];
export const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

// 1x1 transparent PNG.
export const PNG_1X1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

export function staticUri(n) {
    return `mcpkit://static/${n}`;
}

/** resources/list entry for static resource n (odd: text/plain, even: binary). */
export function staticResource(n) {
    const text = n % 2 === 1;
    return {
        uri: staticUri(n),
        name: `static-${n}`,
        mimeType: text ? 'text/plain' : 'application/octet-stream',
        description: text ? `text resource ${n}` : `binary resource ${n}`
    };
}

export function staticContents(n) {
    const uri = staticUri(n);
    if (n % 2 === 1) return { uri, mimeType: 'text/plain', text: `static resource ${n}` };
    return { uri, mimeType: 'application/octet-stream', blob: Buffer.from(`binary resource ${n}`).toString('base64') };
}

/** Cursor = base64 of the next offset. Returns {resources, nextCursor?} or throws on a bad cursor. */
export function staticPage(cursor, extra = []) {
    let offset = 0;
    if (cursor !== undefined && cursor !== null) {
        offset = Number.parseInt(Buffer.from(String(cursor), 'base64').toString('utf8'), 10);
        if (!Number.isInteger(offset) || offset < 0 || offset > STATIC_COUNT) {
            const e = new Error(`invalid cursor: ${cursor}`);
            e.code = -32602;
            throw e;
        }
    }
    const resources = [];
    if (offset === 0) resources.push(...extra);
    for (let n = offset + 1; n <= Math.min(offset + PAGE_SIZE, STATIC_COUNT); n++) resources.push(staticResource(n));
    const next = offset + PAGE_SIZE;
    const page = { resources };
    if (next < STATIC_COUNT) page.nextCursor = Buffer.from(String(next)).toString('base64');
    return page;
}

export const COUNTER_URI = 'mcpkit://counter';
export const ITEM_TEMPLATE = 'mcpkit://items/{id}';

/** Process-wide state: shared by every session of an HTTP server. */
export const state = { counter: 0, completedSlow: 0, cancelledSlow: 0, calls: 0 };

export function greetText(name, style) {
    switch (style) {
        case 'formal':
            return `Good day, ${name}.`;
        case 'funny':
            return `Ahoy, ${name}, you magnificent creature!`;
        default:
            return `Hello, ${name}!`;
    }
}

export function completeFrom(values, prefix) {
    const p = prefix ?? '';
    return values.filter((v) => v.startsWith(p));
}

export const ASK_NAME_SCHEMA = {
    type: 'object',
    properties: { name: { type: 'string', description: 'Your name' } },
    required: ['name']
};

/** Parse --http/--sse/--port/--host/--stdio style args shared by both servers; --help prints `usage` and exits. */
export function serverArgs(argv, usage) {
    const o = { http: false, port: 0, host: '127.0.0.1', path: '/mcp', json: false };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === '--http') o.http = true;
        else if (a === '--sse') o.http = o.sse = true;
        else if (a === '--stdio') o.http = false;
        else if (a === '--port') o.port = Number(argv[++i]);
        else if (a === '--host') o.host = argv[++i];
        else if (a === '--path') o.path = argv[++i];
        else if (a === '--json-response') o.json = true;
        else if (a === '--stateless') o.stateless = true;
        else if (a === '--legacy') o.legacy = argv[++i];
        else if (a === '--help') {
            process.stderr.write(usage + '\n');
            process.exit(0);
        }
        else throw new Error(`unknown argument: ${a}`);
    }
    return o;
}

/** Read a node IncomingMessage body as parsed JSON (undefined for an empty body). */
export async function readJsonBody(req) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const text = Buffer.concat(chunks).toString('utf8');
    if (!text) return undefined;
    try {
        return JSON.parse(text);
    } catch {
        return { __unparseable: text };
    }
}

/** After listen(): announce the URL as one JSON line on stdout (tests read it to learn the port). */
export function announce(server, path) {
    const addr = server.address();
    const url = `http://${addr.address}:${addr.port}${path}`;
    process.stdout.write(JSON.stringify({ listening: url, port: addr.port }) + '\n');
    process.stderr.write(`listening on ${url}\n`);
}

/** On SIGTERM or SIGINT: run `first` (if given), close every transport in `transports` (a Map's values), close
 *  the HTTP server and exit 0. A close that fails is ignored: the process is ending anyway. */
export function stopOnSignals(http, transports, first) {
    const stop = async () => {
        if (first) await first().catch(() => {});
        await Promise.allSettled([...transports.values()].map((t) => t.close()));
        http.close();
        process.exit(0);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
}

/** A node:http server on `host`:`port` whose requests go to `handle(req, res, url)`; a request for a path not in
 *  `paths` is answered 404, and a handler that throws 500 (logged on stderr). Announces paths[0] once listening. */
export function serveHttp({ host, port }, paths, handle) {
    const http = createServer(async (req, res) => {
        try {
            const url = new URL(req.url, 'http://localhost');
            if (!paths.includes(url.pathname)) {
                res.writeHead(404).end('not found');
                return;
            }
            await handle(req, res, url);
        } catch (e) {
            process.stderr.write(`http error: ${e?.stack ?? e}\n`);
            if (!res.headersSent) res.writeHead(500).end(String(e));
        }
    });
    http.listen(port, host, () => announce(http, paths[0]));
    return http;
}

/** The JSON-RPC error both servers answer (404) a request naming a session they do not know with. */
export const SESSION_NOT_FOUND = { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null };

/**
 * The sessionful Streamable HTTP transport for a request with session id `sid` (undefined: none), from `sessions`
 * (id -> transport); without an id, a new one of class `Transport` (either SDK's), which `connect(transport)` connects
 * to a server and which leaves `sessions` when it closes (then what `connect` returned, if a function, is called).
 * Returns undefined for an id `sessions` does not hold.
 */
export async function sessionTransport(sessions, sid, Transport, json, connect) {
    if (sid) return sessions.get(sid);
    let closed;
    const transport = new Transport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: json,
        onsessioninitialized: (id) => sessions.set(id, transport)
    });
    // (before connect: the SDK's server chains the onclose it finds)
    transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
        if (typeof closed === 'function') closed();
    };
    closed = await connect(transport);
    return transport;
}
