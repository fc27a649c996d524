// The scriptable client that ts_client.mjs (SDK 1.x) and ts_client_v2.mjs (SDK v2) both run: the command line, the
// canned answers to the server's requests, the transport, the ops the two SDKs share and the one JSON document on
// stdout. No SDK imports here: each script hands runClient() an adapter of its SDK (what differs, and only that).
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

/**
 * Run the script of steps given on the command line and print what came of it (see README.md). `sdk` is the
 * adapter of one SDK:
 *   usage, name (the package, the output's `sdk`), clientInfo (the default),
 *   newClient(clientInfo, capabilities, options, args) -> the SDK's Client,
 *   ProtocolError (code, message, data): how a canned JSON-RPC error is thrown,
 *   handlers: {roots, sampling, elicitation}: what setRequestHandler takes for each (a schema, or a method name),
 *   StdioClientTransport, StreamableHTTPClientTransport, sseTransport(url, headers),
 *   resultSchema: the permissive result schema of the `request` op,
 *   requestEra?(client): recorded with each request of the server's,
 *   listsAllPages: the SDK walks every page itself when no cursor is given (`all` is then implied),
 *   requestOptions?(step, o): the SDK's own per-request options,
 *   callTool(client, params, step, o), serverInfo(client): the `serverInfo` op,
 *   connected(client, rec, transport): what the output says of the connection once it is made,
 *   ops(client): the SDK's own ops, {name: (step, o) => result},
 *   beforeClose?(): what to close before the client.
 */
export async function runClient(sdk) {
    const args = parseArgs(process.argv.slice(2), { boolean: ['trace', 'help'], multi: ['env', 'header'] });
    if (args.help || !(args.stdio || args.http || args.sse)) {
        process.stderr.write(sdk.usage + '\n');
        process.exit(args.help ? 0 : 64);
    }
    const { options, steps } = loadScript(args.script);
    const trace = Boolean(args.trace || options.trace);
    const rec = newRecord();
    const errors = [];
    const out = { sdk: sdk.name, era: null, protocolVersion: null, serverInfo: null, capabilities: null, instructions: null };

    function finish(code, extra = {}) {
        const doc = { ...out, ...extra, notifications: rec.notifications, requests: rec.requests };
        if (errors.length) doc.errors = errors;
        if (trace) doc.wire = rec.wire;
        if (rec.stderr) doc.stderr = rec.stderr;
        emitAndExit(doc, code);
    }

    const globalTimeout = Number(args['timeout-ms'] ?? options.globalTimeoutMs ?? 120000);
    setTimeout(() => finish(2, { results: out.results ?? null, fatal: { code: 'GLOBAL_TIMEOUT', message: `script did not finish within ${globalTimeout} ms` } }), globalTimeout).unref();

    const capabilities = options.capabilities ?? {
        roots: { listChanged: true },
        sampling: {},
        elicitation: { form: {} }
    };
    const client = sdk.newClient(options.clientInfo ?? sdk.clientInfo, capabilities, options, args);
    client.onerror = (e) => errors.push(errorJson(e));
    const roots = answerServerRequests(sdk, client, capabilities, options, rec);
    const transport = openTransport(sdk, args, rec);
    tapTransport(transport, rec, trace);
    if (args['protocol-version']) {
        // SDK 1.x always offers its LATEST_PROTOCOL_VERSION; rewrite the offer on the wire.
        const send = transport.send;
        transport.send = (msg, o) => {
            if (msg.method === 'initialize') msg = { ...msg, params: { ...msg.params, protocolVersion: args['protocol-version'] } };
            return send(msg, o);
        };
    }

    let connected = false;
    try {
        await client.connect(transport, args['connect-timeout-ms'] ? { timeout: Number(args['connect-timeout-ms']) } : undefined);
        connected = true;
    } catch (e) {
        finish(1, { results: [], fatal: errorJson(e) });
    }
    if (!connected) return;
    Object.assign(out, sdk.connected(client, rec, transport));
    out.sessionId = transport.sessionId ?? null;
    out.results = await runSteps(steps, stepRunner(sdk, client, roots), rec);
    // Give trailing notifications (e.g. a log emitted right after a result) a moment to land.
    await new Promise((r) => setTimeout(r, Number(options.settleMs ?? 50)));
    try {
        await sdk.beforeClose?.();
        if (args.http && options.terminateSession && out.era === 'legacy') await transport.terminateSession();
        await client.close();
    } catch (e) {
        errors.push(errorJson(e));
    }
    finish(0, { results: out.results });
}

/** Install the canned answers to roots/list, sampling/createMessage and elicitation/create (for the declared
 *  capabilities only). Returns the roots, which a `rootsListChanged` step may replace. */
function answerServerRequests(sdk, client, capabilities, options, rec) {
    const roots = { list: options.roots ?? [{ uri: 'file:///tmp/interop-root', name: 'interop-root' }] };
    const counters = {};
    function answer(method, request, produce) {
        const entry = { method, params: request.params };
        if (sdk.requestEra) entry.era = sdk.requestEra(client) ?? null;
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
        if (spec && spec.error) throw new sdk.ProtocolError(spec.error.code ?? -32603, spec.error.message ?? 'canned error', spec.error.data);
    }
    function canned(kind, reply) {
        const spec = cannedAnswer(options[kind], kind, counters);
        maybeError(spec);
        return reply(spec);
    }
    if (capabilities.roots) {
        client.setRequestHandler(sdk.handlers.roots, async (req) =>
            answer('roots/list', req, () => {
                maybeError(options.rootsError ? { error: options.rootsError } : undefined);
                return { roots: roots.list };
            })
        );
    }
    if (capabilities.sampling) {
        client.setRequestHandler(sdk.handlers.sampling, async (req) => {
            // options.samplingDelayMs: a slow model (the wait ignores the abort signal: the SDK decides what is sent)
            if (options.samplingDelayMs) await new Promise((r) => setTimeout(r, Number(options.samplingDelayMs)));
            return answer('sampling/createMessage', req, () => canned('sampling', samplingReply));
        });
    }
    if (capabilities.elicitation) {
        client.setRequestHandler(sdk.handlers.elicitation, async (req) => answer('elicitation/create', req, () => canned('elicitation', elicitationReply)));
    }
    return roots;
}

function openTransport(sdk, args, rec) {
    if (args.stdio) {
        const [command, ...cmdArgs] = splitCommandLine(args.stdio);
        const transport = new sdk.StdioClientTransport({
            command,
            args: cmdArgs,
            cwd: args.cwd,
            env: { ...process.env, ...parseEnv(args.env) },
            stderr: 'pipe'
        });
        collectStderr(transport.stderr, rec);
        return transport;
    }
    if (args.http) return new sdk.StreamableHTTPClientTransport(new URL(args.http), { requestInit: { headers: parseHeaders(args.header) } });
    return sdk.sseTransport(new URL(args.sse), parseHeaders(args.header));
}

function completeParams(step) {
    if (step.ref) return { ref: step.ref, argument: step.argument, context: step.context };
    const ref = step.prompt !== undefined ? { type: 'ref/prompt', name: step.prompt } : { type: 'ref/resource', uri: step.resourceTemplate ?? step.uri };
    const p = { ref, argument: step.argument };
    if (step.context) p.context = step.context;
    return p;
}

/** The adapter runSteps() takes: the ops both SDKs share, then the SDK's own. */
function stepRunner(sdk, client, roots) {
    const lists = {
        listTools: ['tools', (p, o) => client.listTools(p, o)],
        listResources: ['resources', (p, o) => client.listResources(p, o)],
        listResourceTemplates: ['resourceTemplates', (p, o) => client.listResourceTemplates(p, o)],
        listPrompts: ['prompts', (p, o) => client.listPrompts(p, o)]
    };
    const shared = {
        callTool: (step, o) => {
            const params = { name: step.name, arguments: step.arguments ?? {} };
            if (step._meta) params._meta = step._meta;
            return sdk.callTool(client, params, step, o);
        },
        readResource: (step, o) => client.readResource({ uri: step.uri }, o),
        getPrompt: (step, o) => client.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, o),
        complete: (step, o) => client.complete(completeParams(step), o),
        subscribe: (step, o) => client.subscribeResource({ uri: step.uri }, o),
        unsubscribe: (step, o) => client.unsubscribeResource({ uri: step.uri }, o),
        setLevel: (step, o) => client.setLoggingLevel(step.level, o),
        ping: (step, o) => client.ping(o),
        request: (step, o) => client.request({ method: step.method, params: step.params }, sdk.resultSchema, o),
        notify: async (step) => {
            await client.notification({ method: step.method, params: step.params });
            return {};
        },
        rootsListChanged: async (step) => {
            if (step.roots) roots.list = step.roots;
            await client.sendRootsListChanged();
            return {};
        },
        serverInfo: () => sdk.serverInfo(client),
        close: async () => {
            await client.close();
            return {};
        },
        ...sdk.ops(client)
    };
    return {
        async call(op, step, o) {
            sdk.requestOptions?.(step, o);
            if (lists[op]) {
                const [key, fn] = lists[op];
                if (step.all && !sdk.listsAllPages) return walkPages((cursor) => fn(cursor === undefined ? undefined : { cursor }, o), key);
                return fn(step.cursor !== undefined ? { cursor: step.cursor } : undefined, o);
            }
            if (!Object.hasOwn(shared, op)) throw Object.assign(new Error(`unknown op: ${op}`), { code: 'UNKNOWN_OP' });
            return shared[op](step, o);
        }
    };
}
