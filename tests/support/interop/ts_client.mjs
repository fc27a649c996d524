#!/usr/bin/env node
// Scriptable MCP client built on the official TypeScript SDK 1.x (@modelcontextprotocol/sdk,
// handshake era, protocol up to 2025-11-25). See README.md in this directory for usage; the
// client itself is _client.mjs, this file is its adapter to SDK 1.x.
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
import { runClient } from './_client.mjs';
import { errorJson } from './_common.mjs';

await runClient({
    usage: `usage: ts_client.mjs (--stdio "<command line>" | --http <url> | --sse <url>) [--script <json|file|->]
       [--cwd DIR] [--env NAME=VALUE]... [--header "Name: value"]... [--protocol-version V]
       [--trace] [--timeout-ms N]`,
    name: '@modelcontextprotocol/sdk',
    clientInfo: { name: 'ts-interop-client', version: '1.32' },
    newClient: (info, capabilities) => new Client(info, { capabilities }),
    ProtocolError: McpError,
    handlers: { roots: ListRootsRequestSchema, sampling: CreateMessageRequestSchema, elicitation: ElicitRequestSchema },
    StdioClientTransport,
    StreamableHTTPClientTransport,
    sseTransport: (url, headers) =>
        new SSEClientTransport(url, { requestInit: { headers }, eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...init?.headers, ...headers } }) } }),
    resultSchema: ResultSchema,
    listsAllPages: false,
    callTool: (client, params, step, o) => client.callTool(params, undefined, o),
    serverInfo: (client) => ({ serverInfo: client.getServerVersion(), capabilities: client.getServerCapabilities(), instructions: client.getInstructions() }),
    connected: (client, rec, transport) => ({
        era: 'legacy', // SDK 1.x only speaks the initialize-handshake era
        protocolVersion: rec.initializeResult?.protocolVersion ?? transport.protocolVersion ?? null,
        serverInfo: client.getServerVersion() ?? null,
        capabilities: client.getServerCapabilities() ?? null,
        instructions: client.getInstructions() ?? null
    }),
    ops: (client) => ({
        // SDK 1.x experimental tasks (2025-11-25): tools/call with params.task, then tasks/get polling and
        // tasks/result; every message the stream yields, errors as JSON
        async callToolStream(step, o) {
            const params = { name: step.name, arguments: step.arguments ?? {} };
            const messages = [];
            for await (const m of client.experimental.tasks.callToolStream(params, undefined, { ...o, task: step.task ?? {} })) {
                messages.push(m.type === 'error' ? { type: 'error', error: errorJson(m.error) } : m);
            }
            return { messages };
        }
    })
});
