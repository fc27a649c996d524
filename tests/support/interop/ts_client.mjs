#!/usr/bin/env node
// Scriptable MCP client built on the official TypeScript SDK 1.x (@modelcontextprotocol/sdk,
// handshake era, protocol up to 2025-11-25). See README.md in this directory for usage.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import {
    CreateMessageRequestSchema,
    ElicitRequestSchema,
    ListRootsRequestSchema,
    McpError,
    ResultSchema
} from '@modelcontextprotocol/sdk/types.js';
import {
    cannedAnswer,
    collectStderr,
    elicitationReply,
    emitAndExit,
    errorJson,
    loadScript,
    newRecord,
    parseArgs,
    parseEnv,
    parseHeaders,
    runSteps,
    samplingReply,
    splitCommandLine,
    tapTransport,
    walkPages
} from './_common.mjs';

const USAGE = `usage: ts_client.mjs (--stdio "<command line>" | --http <url> | --sse <url>) [--script <json|file|->]
       [--cwd DIR] [--env NAME=VALUE]... [--header "Name: value"]... [--protocol-version V]
       [--trace] [--timeout-ms N]`;

const args = parseArgs(process.argv.slice(2), { boolean: ['trace', 'help'], multi: ['env', 'header'] });
if (args.help || !(args.stdio || args.http || args.sse)) {
    process.stderr.write(USAGE + '\n');
    process.exit(args.help ? 0 : 64);
}
const { options, steps } = loadScript(args.script);
const trace = Boolean(args.trace || options.trace);
const rec = newRecord();
const errors = [];
const out = { sdk: '@modelcontextprotocol/sdk', era: null, protocolVersion: null, serverInfo: null, capabilities: null, instructions: null };

function finish(code, extra = {}) {
    const doc = { ...out, ...extra, notifications: rec.notifications, requests: rec.requests };
    if (errors.length) doc.errors = errors;
    if (trace) doc.wire = rec.wire;
    if (rec.stderr) doc.stderr = rec.stderr;
    emitAndExit(doc, code);
}

const globalTimeout = Number(args['timeout-ms'] ?? options.globalTimeoutMs ?? 120000);
setTimeout(() => finish(2, { results: out.results ?? null, fatal: { code: 'GLOBAL_TIMEOUT', message: `script did not finish within ${globalTimeout} ms` } }), globalTimeout).unref();

// ---- client and canned server->client answers -------------------------------------------
let roots = options.roots ?? [{ uri: 'file:///tmp/interop-root', name: 'interop-root' }];
const counters = {};
const capabilities = options.capabilities ?? {
    roots: { listChanged: true },
    sampling: {},
    elicitation: { form: {} }
};
const client = new Client(options.clientInfo ?? { name: 'ts-interop-client', version: '1.32' }, { capabilities });
client.onerror = (e) => errors.push(errorJson(e));

function answer(method, request, produce) {
    const entry = { method, params: request.params };
    rec.requests.push(entry);
    try {
        const result = produce();
        entry.response = result;
        return result;
    } catch (e) {
        entry.error = errorJson(e);
        throw e;
    }
}
function maybeError(spec) {
    if (spec && spec.error) throw new McpError(spec.error.code ?? -32603, spec.error.message ?? 'canned error', spec.error.data);
}
if (capabilities.roots) {
    client.setRequestHandler(ListRootsRequestSchema, async (req) =>
        answer('roots/list', req, () => {
            maybeError(options.rootsError ? { error: options.rootsError } : undefined);
            return { roots };
        })
    );
}
if (capabilities.sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
        // options.samplingDelayMs: a slow model (the wait ignores the abort signal: the SDK decides what is sent)
        if (options.samplingDelayMs) await new Promise((r) => setTimeout(r, Number(options.samplingDelayMs)));
        return answer('sampling/createMessage', req, () => {
            const spec = cannedAnswer(options.sampling, 'sampling', counters);
            maybeError(spec);
            return samplingReply(spec);
        });
    });
}
if (capabilities.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (req) =>
        answer('elicitation/create', req, () => {
            const spec = cannedAnswer(options.elicitation, 'elicitation', counters);
            maybeError(spec);
            return elicitationReply(spec);
        })
    );
}

// ---- transport ---------------------------------------------------------------------------
let transport;
if (args.stdio) {
    const [command, ...cmdArgs] = splitCommandLine(args.stdio);
    transport = new StdioClientTransport({
        command,
        args: cmdArgs,
        cwd: args.cwd,
        env: { ...process.env, ...parseEnv(args.env) },
        stderr: 'pipe'
    });
    collectStderr(transport.stderr, rec);
} else if (args.http) {
    transport = new StreamableHTTPClientTransport(new URL(args.http), { requestInit: { headers: parseHeaders(args.header) } });
} else {
    const headers = parseHeaders(args.header);
    transport = new SSEClientTransport(new URL(args.sse), { requestInit: { headers }, eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...init?.headers, ...headers } }) } });
}
tapTransport(transport, rec, trace);
if (args['protocol-version']) {
    // SDK 1.x always offers its LATEST_PROTOCOL_VERSION; rewrite the offer on the wire.
    const send = transport.send;
    transport.send = (msg, o) => {
        if (msg.method === 'initialize') msg = { ...msg, params: { ...msg.params, protocolVersion: args['protocol-version'] } };
        return send(msg, o);
    };
}

// ---- ops ---------------------------------------------------------------------------------
const LISTS = {
    listTools: ['tools', (p, o) => client.listTools(p, o)],
    listResources: ['resources', (p, o) => client.listResources(p, o)],
    listResourceTemplates: ['resourceTemplates', (p, o) => client.listResourceTemplates(p, o)],
    listPrompts: ['prompts', (p, o) => client.listPrompts(p, o)]
};

function completeParams(step) {
    if (step.ref) return { ref: step.ref, argument: step.argument, context: step.context };
    const ref = step.prompt !== undefined ? { type: 'ref/prompt', name: step.prompt } : { type: 'ref/resource', uri: step.resourceTemplate ?? step.uri };
    const p = { ref, argument: step.argument };
    if (step.context) p.context = step.context;
    return p;
}

const adapter = {
    async call(op, step, o) {
        if (LISTS[op]) {
            const [key, fn] = LISTS[op];
            if (step.all) return walkPages((cursor) => fn(cursor === undefined ? undefined : { cursor }, o), key);
            return fn(step.cursor !== undefined ? { cursor: step.cursor } : undefined, o);
        }
        switch (op) {
            case 'callTool': {
                const params = { name: step.name, arguments: step.arguments ?? {} };
                if (step._meta) params._meta = step._meta;
                return client.callTool(params, undefined, o);
            }
            case 'callToolStream': {
                // SDK 1.x experimental tasks (2025-11-25): tools/call with params.task, then tasks/get polling and
                // tasks/result; every message the stream yields, errors as JSON
                const params = { name: step.name, arguments: step.arguments ?? {} };
                const messages = [];
                for await (const m of client.experimental.tasks.callToolStream(params, undefined, { ...o, task: step.task ?? {} })) {
                    messages.push(m.type === 'error' ? { type: 'error', error: errorJson(m.error) } : m);
                }
                return { messages };
            }
            case 'readResource':
                return client.readResource({ uri: step.uri }, o);
            case 'getPrompt':
                return client.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, o);
            case 'complete':
                return client.complete(completeParams(step), o);
            case 'subscribe':
                return client.subscribeResource({ uri: step.uri }, o);
            case 'unsubscribe':
                return client.unsubscribeResource({ uri: step.uri }, o);
            case 'setLevel':
                return client.setLoggingLevel(step.level, o);
            case 'ping':
                return client.ping(o);
            case 'request':
                return client.request({ method: step.method, params: step.params }, ResultSchema, o);
            case 'notify':
                await client.notification({ method: step.method, params: step.params });
                return {};
            case 'rootsListChanged':
                if (step.roots) roots = step.roots;
                await client.sendRootsListChanged();
                return {};
            case 'serverInfo':
                return { serverInfo: client.getServerVersion(), capabilities: client.getServerCapabilities(), instructions: client.getInstructions() };
            case 'close':
                await client.close();
                return {};
            default:
                throw Object.assign(new Error(`unknown op: ${op}`), { code: 'UNKNOWN_OP' });
        }
    }
};

// ---- run ---------------------------------------------------------------------------------
let connected = false;
try {
    await client.connect(transport, args['connect-timeout-ms'] ? { timeout: Number(args['connect-timeout-ms']) } : undefined);
    connected = true;
} catch (e) {
    finish(1, { results: [], fatal: errorJson(e) });
}
if (connected) {
    out.era = 'legacy'; // SDK 1.x only speaks the initialize-handshake era
    out.protocolVersion = rec.initializeResult?.protocolVersion ?? transport.protocolVersion ?? null;
    out.serverInfo = client.getServerVersion() ?? null;
    out.capabilities = client.getServerCapabilities() ?? null;
    out.instructions = client.getInstructions() ?? null;
    out.sessionId = transport.sessionId ?? null;
    out.results = await runSteps(steps, adapter, rec);
    // Give trailing notifications (e.g. a log emitted right after a result) a moment to land.
    await new Promise((r) => setTimeout(r, Number(options.settleMs ?? 50)));
    try {
        if (args.http && options.terminateSession) await transport.terminateSession();
        await client.close();
    } catch (e) {
        errors.push(errorJson(e));
    }
    finish(0, { results: out.results });
}
