#!/usr/bin/env node
// Scriptable MCP client built on the official TypeScript SDK v2 (@modelcontextprotocol/client 2.x):
// negotiates 2026-07-28 (server/discover, per-request _meta envelope, input_required round trips)
// and falls back to the 2025 initialize handshake. See README.md in this directory for usage.
import * as z from 'zod';
import { Client, ProtocolError, SSEClientTransport, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
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
    tapTransport
} from './_common.mjs';

const USAGE = `usage: ts_client_v2.mjs (--stdio "<command line>" | --http <url> | --sse <url>) [--script <json|file|->]
       [--negotiation auto|legacy|<version to pin>] [--cwd DIR] [--env NAME=VALUE]... [--header "Name: value"]...
       [--protocol-version V (legacy initialize offer)] [--trace] [--timeout-ms N]`;

const args = parseArgs(process.argv.slice(2), { boolean: ['trace', 'help'], multi: ['env', 'header'] });
if (args.help || !(args.stdio || args.http || args.sse)) {
    process.stderr.write(USAGE + '\n');
    process.exit(args.help ? 0 : 64);
}
const { options, steps } = loadScript(args.script);
const trace = Boolean(args.trace || options.trace);
const rec = newRecord();
const errors = [];
const out = { sdk: '@modelcontextprotocol/client', era: null, protocolVersion: null, serverInfo: null, capabilities: null, instructions: null };

function finish(code, extra = {}) {
    const doc = { ...out, ...extra, notifications: rec.notifications, requests: rec.requests };
    if (errors.length) doc.errors = errors;
    if (trace) doc.wire = rec.wire;
    if (rec.stderr) doc.stderr = rec.stderr;
    emitAndExit(doc, code);
}

const globalTimeout = Number(args['timeout-ms'] ?? options.globalTimeoutMs ?? 120000);
setTimeout(() => finish(2, { results: out.results ?? null, fatal: { code: 'GLOBAL_TIMEOUT', message: `script did not finish within ${globalTimeout} ms` } }), globalTimeout).unref();

// ---- client and canned answers (server->client requests in the 2025 era, input_required in 2026) ----
let roots = options.roots ?? [{ uri: 'file:///tmp/interop-root', name: 'interop-root' }];
const counters = {};
const capabilities = options.capabilities ?? {
    roots: { listChanged: true },
    sampling: {},
    elicitation: { form: {} }
};
const negotiation = args.negotiation ?? options.negotiation ?? 'auto';
const versionNegotiation = { mode: negotiation === 'auto' || negotiation === 'legacy' ? negotiation : { pin: negotiation } };
if (options.probeTimeoutMs) versionNegotiation.probe = { timeoutMs: options.probeTimeoutMs };
const clientOptions = { capabilities, versionNegotiation };
if (options.inputRequired) clientOptions.inputRequired = options.inputRequired;
const client = new Client(options.clientInfo ?? { name: 'ts-interop-client-v2', version: '2.4' }, clientOptions);
client.onerror = (e) => errors.push(errorJson(e));

function answer(method, request, produce) {
    const entry = { method, params: request.params, era: client.getProtocolEra() ?? null };
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
    if (spec && spec.error) throw new ProtocolError(spec.error.code ?? -32603, spec.error.message ?? 'canned error', spec.error.data);
}
if (capabilities.roots) {
    client.setRequestHandler('roots/list', async (req) =>
        answer('roots/list', req, () => {
            maybeError(options.rootsError ? { error: options.rootsError } : undefined);
            return { roots };
        })
    );
}
if (capabilities.sampling) {
    client.setRequestHandler('sampling/createMessage', async (req) => {
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
    client.setRequestHandler('elicitation/create', async (req) =>
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
    transport = new SSEClientTransport(new URL(args.sse), { requestInit: { headers: parseHeaders(args.header) } });
}
tapTransport(transport, rec, trace);
if (args['protocol-version']) {
    const send = transport.send;
    transport.send = (msg, o) => {
        if (msg.method === 'initialize') msg = { ...msg, params: { ...msg.params, protocolVersion: args['protocol-version'] } };
        return send(msg, o);
    };
}

// ---- ops ---------------------------------------------------------------------------------
const LISTS = {
    listTools: (p, o) => client.listTools(p, o),
    listResources: (p, o) => client.listResources(p, o),
    listResourceTemplates: (p, o) => client.listResourceTemplates(p, o),
    listPrompts: (p, o) => client.listPrompts(p, o)
};
const LOOSE = z.looseObject({});
const subscriptions = new Map();

function completeParams(step) {
    if (step.ref) return { ref: step.ref, argument: step.argument, context: step.context };
    const ref = step.prompt !== undefined ? { type: 'ref/prompt', name: step.prompt } : { type: 'ref/resource', uri: step.resourceTemplate ?? step.uri };
    const p = { ref, argument: step.argument };
    if (step.context) p.context = step.context;
    return p;
}

const adapter = {
    async call(op, step, o) {
        if (step.cacheMode) o.cacheMode = step.cacheMode;
        // Manual multi-round-trip (2026-07-28): return InputRequiredResult as-is instead of
        // auto-fulfilling; a later step can retry with inputResponses/requestState.
        if (step.allowInputRequired) o.allowInputRequired = true;
        if (LISTS[op]) {
            // Without a cursor the v2 client walks every page itself and returns the aggregate
            // ("all" is therefore implied); with a cursor it fetches exactly that page.
            return LISTS[op](step.cursor !== undefined ? { cursor: step.cursor } : undefined, o);
        }
        switch (op) {
            case 'callTool': {
                const params = { name: step.name, arguments: step.arguments ?? {} };
                if (step._meta) params._meta = step._meta;
                if (step.inputResponses) params.inputResponses = step.inputResponses;
                if (step.requestState !== undefined) params.requestState = step.requestState;
                return client.callTool(params, o);
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
            case 'discover':
                return client.discover(o);
            case 'listen': {
                // 2026-07-28 subscriptions/listen; filter e.g. {"resourceSubscriptions":["mcpkit://counter"],"toolsListChanged":true}
                const sub = await client.listen(step.filter ?? {}, o);
                const name = step.name ?? 'default';
                subscriptions.set(name, sub);
                return { honoredFilter: sub.honoredFilter };
            }
            case 'closeListen': {
                const name = step.name ?? 'default';
                const sub = subscriptions.get(name);
                if (!sub) throw Object.assign(new Error(`no open listen named ${name}`), { code: 'NO_LISTEN' });
                await sub.close();
                subscriptions.delete(name);
                return { closed: await sub.closed };
            }
            case 'request':
                return client.request({ method: step.method, params: step.params }, LOOSE, o);
            case 'notify':
                await client.notification({ method: step.method, params: step.params });
                return {};
            case 'rootsListChanged':
                if (step.roots) roots = step.roots;
                await client.sendRootsListChanged();
                return {};
            case 'serverInfo':
                return connectionInfo();
            case 'close':
                await client.close();
                return {};
            default:
                throw Object.assign(new Error(`unknown op: ${op}`), { code: 'UNKNOWN_OP' });
        }
    }
};

function connectionInfo() {
    return {
        era: client.getProtocolEra() ?? null,
        protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
        serverInfo: client.getServerVersion() ?? null,
        capabilities: client.getServerCapabilities() ?? null,
        instructions: client.getInstructions() ?? null,
        discover: client.getDiscoverResult() ?? null
    };
}

// ---- run ---------------------------------------------------------------------------------
let connected = false;
try {
    await client.connect(transport, args['connect-timeout-ms'] ? { timeout: Number(args['connect-timeout-ms']) } : undefined);
    connected = true;
} catch (e) {
    finish(1, { results: [], fatal: errorJson(e) });
}
if (connected) {
    Object.assign(out, connectionInfo());
    out.sessionId = transport.sessionId ?? null;
    out.results = await runSteps(steps, adapter, rec);
    await new Promise((r) => setTimeout(r, Number(options.settleMs ?? 50)));
    try {
        for (const sub of subscriptions.values()) await sub.close();
        if (args.http && options.terminateSession && out.era === 'legacy') await transport.terminateSession();
        await client.close();
    } catch (e) {
        errors.push(errorJson(e));
    }
    finish(0, { results: out.results });
}
