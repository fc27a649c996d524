// Shared plumbing for the interop driver scripts (ts_client*.mjs, ts_server*.mjs).
// No SDK imports here: each driver loads its own package (SDK 1.32 or v2) and hands
// an adapter to runSteps().
import { readFileSync } from 'node:fs';
import { format } from 'node:util';

// stdout carries either the protocol (stdio servers) or the single result document (clients):
// anything the SDKs print through console.* goes to stderr instead.
for (const k of ['log', 'info', 'debug', 'warn']) console[k] = (...a) => process.stderr.write(format(...a) + '\n');

/** Split a command line the way a POSIX shell would for simple cases: quotes and backslashes. */
export function splitCommandLine(line) {
    const out = [];
    let cur = '';
    let inWord = false;
    let quote = null;
    for (let i = 0; i < line.length; i++) {
        const c = line[i];
        if (quote === "'") {
            if (c === "'") quote = null;
            else cur += c;
        } else if (quote === '"') {
            if (c === '"') quote = null;
            else if (c === '\\' && i + 1 < line.length && '"\\$`'.includes(line[i + 1])) cur += line[++i];
            else cur += c;
        } else if (c === "'" || c === '"') {
            quote = c;
            inWord = true;
        } else if (c === '\\' && i + 1 < line.length) {
            cur += line[++i];
            inWord = true;
        } else if (/\s/.test(c)) {
            if (inWord) out.push(cur);
            cur = '';
            inWord = false;
        } else {
            cur += c;
            inWord = true;
        }
    }
    if (quote) throw new Error(`unterminated ${quote} in command line: ${line}`);
    if (inWord) out.push(cur);
    return out;
}

/** Minimal argv parser: --flag value, --flag=value, repeated flags collect into arrays for `multi`. */
export function parseArgs(argv, { boolean = [], multi = [] } = {}) {
    const opts = {};
    for (let i = 0; i < argv.length; i++) {
        let a = argv[i];
        if (!a.startsWith('--')) throw new Error(`unexpected argument: ${a}`);
        a = a.slice(2);
        let value;
        const eq = a.indexOf('=');
        if (eq >= 0) {
            value = a.slice(eq + 1);
            a = a.slice(0, eq);
        } else if (boolean.includes(a)) {
            value = true;
        } else {
            if (i + 1 >= argv.length) throw new Error(`--${a} needs a value`);
            value = argv[++i];
        }
        if (multi.includes(a)) (opts[a] ??= []).push(value);
        else opts[a] = value;
    }
    return opts;
}

/** --script accepts inline JSON (starts with [ or {), "-" for stdin, or a file path. */
export function loadScript(spec) {
    if (spec === undefined) return { options: {}, steps: [] };
    const trimmed = spec.trimStart();
    let text;
    if (trimmed.startsWith('[') || trimmed.startsWith('{')) text = spec;
    else if (spec === '-') text = readFileSync(0, 'utf8');
    else text = readFileSync(spec, 'utf8');
    const parsed = JSON.parse(text);
    if (Array.isArray(parsed)) return { options: {}, steps: parsed };
    return { options: parsed.options ?? {}, steps: parsed.steps ?? [] };
}

export function parseHeaders(list) {
    const headers = {};
    for (const h of list ?? []) {
        const i = h.indexOf(':');
        if (i < 0) throw new Error(`bad --header (want "Name: value"): ${h}`);
        headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
    }
    return headers;
}

export function parseEnv(list) {
    const env = {};
    for (const kv of list ?? []) {
        const i = kv.indexOf('=');
        if (i < 0) throw new Error(`bad --env (want NAME=value): ${kv}`);
        env[kv.slice(0, i)] = kv.slice(i + 1);
    }
    return env;
}

/** JSON-friendly view of an error thrown by either SDK (McpError / ProtocolError / SdkError / AbortError). */
export function errorJson(e) {
    if (e === undefined || e === null) return { code: null, message: String(e) };
    const out = { code: e.code ?? null, message: e.message ?? String(e) };
    if (e.data !== undefined) out.data = e.data;
    if (e.name && e.name !== 'Error') out.name = e.name;
    return out;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Write one JSON document to stdout and exit once it is flushed. */
export function emitAndExit(obj, code = 0) {
    const text = JSON.stringify(obj) + '\n';
    process.stdout.write(text, () => process.exit(code));
}

/**
 * Record every message crossing `transport` (must be called before connect: both SDKs chain a
 * pre-set onmessage). Inbound notifications go to rec.notifications; with trace on, every
 * message goes to rec.wire as {dir, msg}.
 */
export function tapTransport(transport, rec, trace) {
    const origSend = transport.send.bind(transport);
    transport.send = (msg, opts) => {
        if (trace) rec.wire.push({ dir: 'out', msg });
        return origSend(msg, opts);
    };
    transport.onmessage = (msg) => {
        if (trace) rec.wire.push({ dir: 'in', msg });
        if (msg && msg.result && typeof msg.result.protocolVersion === 'string' && msg.result.capabilities && rec.initializeResult === undefined) {
            rec.initializeResult = msg.result;
        }
        if (msg && typeof msg === 'object' && 'method' in msg && !('id' in msg)) {
            const index = rec.notifications.push({ method: msg.method, params: msg.params }) - 1;
            // Hand the notification to the oldest waiter that wants it (and mark it consumed).
            const w = rec.waiters.find((x) => !x.method || x.method === msg.method);
            if (w) {
                rec.waiters.splice(rec.waiters.indexOf(w), 1);
                rec.consumed.add(index);
                w.resolve(msg);
            }
        }
    };
}

/**
 * Canned answers for server->client requests. `spec` is an object, or an array consumed in order
 * (the last entry repeats). {"error": {"code", "message"}} answers with a JSON-RPC error.
 */
export function cannedAnswer(spec, counterKey, counters) {
    if (Array.isArray(spec)) {
        const i = counters[counterKey] ?? 0;
        counters[counterKey] = i + 1;
        return spec[Math.min(i, spec.length - 1)];
    }
    return spec;
}

export function samplingReply(spec) {
    const s = spec ?? {};
    return {
        role: 'assistant',
        model: s.model ?? 'canned-model',
        stopReason: s.stopReason ?? 'endTurn',
        content: s.content ?? { type: 'text', text: s.text ?? 'canned sampling reply' }
    };
}

export function elicitationReply(spec) {
    const s = spec ?? { action: 'decline' };
    const out = { action: s.action ?? 'accept' };
    if (out.action === 'accept') out.content = s.content ?? {};
    return out;
}

/**
 * The shared step runner. `adapter` supplies SDK-specific calls:
 *   adapter.call(op, step, requestOptions) -> result (throws on error)
 * Generic ops handled here: sleep, waitNotification, parallel, cancelAfterMs (wrapper form).
 */
export async function runSteps(steps, adapter, rec) {
    const results = [];
    for (const step of steps) results.push(await runStep(step, adapter, rec));
    return results;
}

export function requestOptions(step, rec) {
    const opts = {};
    if (step.timeoutMs !== undefined) opts.timeout = step.timeoutMs;
    if (step.maxTotalTimeoutMs !== undefined) opts.maxTotalTimeout = step.maxTotalTimeoutMs;
    if (step.resetTimeoutOnProgress) opts.resetTimeoutOnProgress = true;
    if (step.progress) {
        // Asking for progress makes the SDK attach a progressToken; the notifications themselves
        // are recorded raw by tapTransport, this keeps the per-step view too.
        step._progress = [];
        opts.onprogress = (p) => step._progress.push(p);
    }
    if (step.cancelAfterMs !== undefined) {
        const ac = new AbortController();
        setTimeout(() => ac.abort(step.cancelReason ?? 'cancelled by interop script'), step.cancelAfterMs);
        opts.signal = ac.signal;
    }
    return opts;
}

async function runStep(step, adapter, rec) {
    try {
        switch (step.op) {
            case 'sleep':
                await sleep(step.ms ?? 0);
                return {};
            case 'waitNotification': {
                // Consumes notifications in arrival order: the first matching notification not yet
                // consumed by an earlier waitNotification (already received or the next to arrive).
                const matches = (n) => !step.method || n.method === step.method;
                const idx = rec.notifications.findIndex((n, i) => matches(n) && !rec.consumed.has(i));
                if (idx >= 0) {
                    rec.consumed.add(idx);
                    const n = rec.notifications[idx];
                    return { method: n.method, params: n.params };
                }
                const timeoutMs = step.timeoutMs ?? 5000;
                const msg = await new Promise((resolve, reject) => {
                    const w = { method: step.method, resolve };
                    rec.waiters.push(w);
                    setTimeout(() => {
                        const i = rec.waiters.indexOf(w);
                        if (i >= 0) rec.waiters.splice(i, 1);
                        reject(Object.assign(new Error(`no ${step.method ?? 'notification'} within ${timeoutMs} ms`), { code: 'WAIT_TIMEOUT' }));
                    }, timeoutMs);
                });
                return { method: msg.method, params: msg.params };
            }
            case 'parallel':
                return { results: await Promise.all((step.steps ?? []).map((s) => runStep(s, adapter, rec))) };
            case 'cancelAfterMs': {
                const inner = { ...(step.step ?? step.request ?? {}), cancelAfterMs: step.ms ?? step.cancelAfterMs };
                return await runStep(inner, adapter, rec);
            }
            default: {
                const opts = requestOptions(step, rec);
                const result = await adapter.call(step.op, step, opts);
                if (step._progress && step.includeProgress) return { ...result, _progress: step._progress };
                return result === undefined ? {} : result;
            }
        }
    } catch (e) {
        const err = { error: errorJson(e) };
        if (step._progress && step.includeProgress) err._progress = step._progress;
        return err;
    }
}

/** Walk every page of a list method using explicit cursors; returns {items, pages}. */
export async function walkPages(fetchPage, key, maxPages = 1000) {
    const items = [];
    let cursor;
    let pages = 0;
    do {
        const page = await fetchPage(cursor);
        pages++;
        items.push(...(page[key] ?? []));
        cursor = page.nextCursor;
    } while (cursor !== undefined && cursor !== null && pages < maxPages);
    return { [key]: items, pages };
}

export function newRecord() {
    return { notifications: [], consumed: new Set(), requests: [], wire: [], waiters: [], stderr: '' };
}

/** Collect a child's stderr (capped) into rec.stderr. */
export function collectStderr(stream, rec, cap = 65536) {
    if (!stream) return;
    stream.on('data', (chunk) => {
        if (rec.stderr.length < cap) rec.stderr += chunk.toString('utf8').slice(0, cap - rec.stderr.length);
    });
}
