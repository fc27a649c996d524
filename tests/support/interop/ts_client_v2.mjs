#!/usr/bin/env node
// Scriptable MCP client built on the official TypeScript SDK v2 (@modelcontextprotocol/client 2.x):
// negotiates 2026-07-28 (server/discover, per-request _meta envelope, input_required round trips)
// and falls back to the 2025 initialize handshake. See README.md in this directory for usage; the
// client itself is _client.mjs, this file is its adapter to SDK v2.
import * as z from 'zod';
import { Client, ProtocolError, SSEClientTransport, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { runClient } from './_client.mjs';

/** Open subscriptions/listen streams by name (closed before the client is). */
const subscriptions = new Map();

function newClient(info, capabilities, options, args) {
    const negotiation = args.negotiation ?? options.negotiation ?? 'auto';
    const versionNegotiation = { mode: negotiation === 'auto' || negotiation === 'legacy' ? negotiation : { pin: negotiation } };
    if (options.probeTimeoutMs) versionNegotiation.probe = { timeoutMs: options.probeTimeoutMs };
    const clientOptions = { capabilities, versionNegotiation };
    if (options.inputRequired) clientOptions.inputRequired = options.inputRequired;
    return new Client(info, clientOptions);
}

function connectionInfo(client) {
    return {
        era: client.getProtocolEra() ?? null,
        protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
        serverInfo: client.getServerVersion() ?? null,
        capabilities: client.getServerCapabilities() ?? null,
        instructions: client.getInstructions() ?? null,
        discover: client.getDiscoverResult() ?? null
    };
}

await runClient({
    usage: `usage: ts_client_v2.mjs (--stdio "<command line>" | --http <url> | --sse <url>) [--script <json|file|->]
       [--negotiation auto|legacy|<version to pin>] [--cwd DIR] [--env NAME=VALUE]... [--header "Name: value"]...
       [--protocol-version V (legacy initialize offer)] [--trace] [--timeout-ms N]`,
    name: '@modelcontextprotocol/client',
    clientInfo: { name: 'ts-interop-client-v2', version: '2.4' },
    newClient,
    ProtocolError,
    // in the 2025 era real requests of the server's; in 2026-07-28 the input_required rounds the SDK fulfils
    handlers: { roots: 'roots/list', sampling: 'sampling/createMessage', elicitation: 'elicitation/create' },
    StdioClientTransport,
    StreamableHTTPClientTransport,
    sseTransport: (url, headers) => new SSEClientTransport(url, { requestInit: { headers } }),
    resultSchema: z.looseObject({}),
    requestEra: (client) => client.getProtocolEra(),
    // Without a cursor the v2 client walks every page itself and returns the aggregate ("all" is therefore
    // implied); with a cursor it fetches exactly that page.
    listsAllPages: true,
    requestOptions(step, o) {
        if (step.cacheMode) o.cacheMode = step.cacheMode;
        // Manual multi-round-trip (2026-07-28): return InputRequiredResult as-is instead of
        // auto-fulfilling; a later step can retry with inputResponses/requestState.
        if (step.allowInputRequired) o.allowInputRequired = true;
    },
    callTool(client, params, step, o) {
        if (step.inputResponses) params.inputResponses = step.inputResponses;
        if (step.requestState !== undefined) params.requestState = step.requestState;
        return client.callTool(params, o);
    },
    serverInfo: connectionInfo,
    connected: connectionInfo,
    ops: (client) => ({
        discover: (step, o) => client.discover(o),
        async listen(step, o) {
            // 2026-07-28 subscriptions/listen; filter e.g. {"resourceSubscriptions":["mcpkit://counter"],"toolsListChanged":true}
            const sub = await client.listen(step.filter ?? {}, o);
            subscriptions.set(step.name ?? 'default', sub);
            return { honoredFilter: sub.honoredFilter };
        },
        async closeListen(step) {
            const name = step.name ?? 'default';
            const sub = subscriptions.get(name);
            if (!sub) throw Object.assign(new Error(`no open listen named ${name}`), { code: 'NO_LISTEN' });
            await sub.close();
            subscriptions.delete(name);
            return { closed: await sub.closed };
        }
    }),
    async beforeClose() {
        for (const sub of subscriptions.values()) await sub.close();
    }
});
