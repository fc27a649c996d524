// The "everything" surface ts_server.mjs (SDK 1.x) and ts_server_v2.mjs (SDK v2) both serve, registered once on
// either SDK's McpServer: its tools, resources and prompts. No SDK imports here: each server hands registerSurface()
// an adapter of its SDK, which also brings the tools the two SDKs write differently (sample, ask_name, roots,
// add_tool, log); the servers add the subscriptions and the transports themselves.
import * as z from 'zod';
import {
    completeFrom,
    COUNTER_URI,
    GREET_STYLES,
    greetText,
    ITEM_IDS,
    ITEM_TEMPLATE,
    PNG_1X1,
    STATIC_COUNT,
    staticContents,
    staticPage,
    staticUri,
    state
} from './_fixtures.mjs';

export function text(t) {
    return { content: [{ type: 'text', text: t }] };
}

/** The tools, in the order both servers list them. */
const TOOLS = ['echo', 'add', 'slow', 'fail', 'sample', 'ask_name', 'roots', 'touch', 'add_tool', 'log', 'image', 'stats'];

/**
 * Register the tools (those of TOOLS, the SDK's own from `sdk.ownTools(mcp)`: {name: [config, handler]}); the
 * static, counter and item resources; the simple, greet and with_resource prompts. `sdk`:
 *   schema(shape): a tool's or prompt's schema from a zod shape (1.x takes the shape itself, v2 a z.object),
 *   ResourceTemplate, optionalCompletable(complete): the greet prompt's optional, completable `style`,
 *   call(extra): {signal, progressToken, notify(notification)} of a tool call's second argument,
 *   cancelled(): the error a cancelled `slow` throws,
 *   resourceUpdated(uri): tell the sessions subscribed to `uri` (after `touch`),
 *   listResources(mcp, page): answer resources/list with page(cursor) (which throws an Error with code -32602 for a
 *     bad cursor),
 *   ownTools(mcp): sample, ask_name, roots, add_tool and log, as this SDK writes them.
 */
export function registerSurface(mcp, sdk) {
    const tools = { ...sharedTools(sdk), ...sdk.ownTools(mcp) };
    for (const name of TOOLS) mcp.registerTool(name, ...tools[name]);

    for (let n = 1; n <= STATIC_COUNT; n++) {
        mcp.registerResource(`static-${n}`, staticUri(n), {}, async () => ({ contents: [staticContents(n)] }));
    }
    mcp.registerResource('counter', COUNTER_URI, { mimeType: 'text/plain', description: 'subscribable; changed by touch' }, async (uri) => ({
        contents: [{ uri: uri.href, mimeType: 'text/plain', text: String(state.counter) }]
    }));
    mcp.registerResource(
        'item',
        new sdk.ResourceTemplate(ITEM_TEMPLATE, { list: undefined, complete: { id: (value) => completeFrom(ITEM_IDS, value) } }),
        { mimeType: 'application/json', description: 'JSON item by id' },
        async (uri, { id }) => ({ contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, name: `item ${id}` }) }] })
    );
    // Paginated listing (10 a page) replaces McpServer's single-page list.
    sdk.listResources(mcp, (cursor) => staticPage(cursor, [{ uri: COUNTER_URI, name: 'counter', mimeType: 'text/plain' }]));

    mcp.registerPrompt('simple', { description: 'A prompt without arguments' }, async () => ({
        messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt.' } }]
    }));
    mcp.registerPrompt(
        'greet',
        {
            description: 'Greet someone; style completes to formal/friendly/funny',
            argsSchema: sdk.schema({ name: z.string(), style: sdk.optionalCompletable((value) => completeFrom(GREET_STYLES, value)) })
        },
        async ({ name, style }) => ({ messages: [{ role: 'user', content: { type: 'text', text: greetText(name, style) } }] })
    );
    mcp.registerPrompt('with_resource', { description: 'Embeds static resource n', argsSchema: sdk.schema({ n: z.string() }) }, async ({ n }) => ({
        messages: [{ role: 'user', content: { type: 'resource', resource: staticContents(Number(n)) } }]
    }));
}

/** The tools whose behaviour is the same in both SDKs: {name: [config, handler]}. */
function sharedTools(sdk) {
    return {
        echo: [{ description: 'Echo the text back', inputSchema: sdk.schema({ text: z.string() }) }, async ({ text: t }) => text(t)],

        add: [
            {
                description: 'Add two integers',
                inputSchema: sdk.schema({ a: z.number().int(), b: z.number().int() }),
                outputSchema: sdk.schema({ result: z.number().int() })
            },
            async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }], structuredContent: { result: a + b } })
        ],

        slow: [
            {
                description: 'Sleep steps x delay_ms, reporting progress when asked; stops when cancelled',
                inputSchema: sdk.schema({ steps: z.number().int().min(0).default(5), delay_ms: z.number().int().min(0).default(100) })
            },
            async ({ steps, delay_ms }, extra) => {
                const { signal, progressToken, notify } = sdk.call(extra);
                for (let i = 1; i <= steps; i++) {
                    await new Promise((resolve) => {
                        const t = setTimeout(resolve, delay_ms);
                        signal.addEventListener('abort', () => {
                            clearTimeout(t);
                            resolve();
                        }, { once: true });
                    });
                    if (signal.aborted) {
                        state.cancelledSlow++;
                        process.stderr.write(`slow: cancelled at step ${i}\n`);
                        throw sdk.cancelled();
                    }
                    if (progressToken !== undefined) {
                        await notify({ method: 'notifications/progress', params: { progressToken, progress: i, total: steps, message: `step ${i}/${steps}` } });
                    }
                }
                state.completedSlow++;
                return text(`done after ${steps} steps`);
            }
        ],

        fail: [{ description: 'Always fails with isError: true' }, async () => ({ content: [{ type: 'text', text: 'this tool always fails' }], isError: true })],

        touch: [
            { description: 'Change a subscribable resource (mcpkit://counter)', inputSchema: sdk.schema({ uri: z.string().default(COUNTER_URI) }) },
            async ({ uri }) => {
                state.counter++;
                await sdk.resourceUpdated(uri);
                return text(`counter=${state.counter}`);
            }
        ],

        image: [{ description: 'Return a 1x1 PNG' }, async () => ({ content: [{ type: 'image', data: PNG_1X1, mimeType: 'image/png' }] })],

        stats: [
            { description: 'Process-wide counters (slow completed/cancelled, counter)' },
            async () => ({ content: [{ type: 'text', text: JSON.stringify(state) }], structuredContent: { ...state } })
        ]
    };
}
