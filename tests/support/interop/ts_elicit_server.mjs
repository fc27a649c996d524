#!/usr/bin/env node
// A stdio server on the official TypeScript SDK 1.x (@modelcontextprotocol/sdk) with one tool, `ask`: it sends
// the client an elicitation/create (form) whose requestedSchema is its `schema` argument (JSON text) as given,
// and answers the ElicitResult as the SDK parsed it (JSON text), or `refused: <the SDK's error>` with isError
// when the SDK refused the client's answer (e.g. a null in its content) or the client refused the request.
import * as z from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { ElicitResultSchema } from '@modelcontextprotocol/sdk/types.js';

const mcp = new McpServer({ name: 'ts-elicit', version: '1.0.0' });

mcp.registerTool(
    'ask',
    { description: 'Elicit a form whose requestedSchema is the `schema` argument (JSON text)', inputSchema: { schema: z.string() } },
    async ({ schema }, extra) => {
        try {
            const r = await extra.sendRequest(
                { method: 'elicitation/create', params: { mode: 'form', message: 'Fill in the form', requestedSchema: JSON.parse(schema) } },
                ElicitResultSchema
            );
            return { content: [{ type: 'text', text: JSON.stringify(r) }] };
        } catch (e) {
            return { content: [{ type: 'text', text: `refused: ${e.message}` }], isError: true };
        }
    }
);

await mcp.connect(new StdioServerTransport());
