// Preload for third-party HTTP servers that listen on all interfaces (e.g. server-everything's
// `app.listen(PORT)`): forces every TCP listen onto 127.0.0.1 and announces the bound port as one
// JSON line on stdout ({"listening": "127.0.0.1:PORT", "port": PORT}), so PORT=0 can be used.
// Usage: node --import ./localhost_preload.mjs <server script> ...
import net from 'node:net';

const HOST = process.env.INTEROP_BIND_HOST ?? '127.0.0.1';
const origListen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
    const first = args[0];
    if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
        if (typeof args[1] === 'string') args[1] = HOST;
        else args.splice(1, 0, HOST);
    } else if (first && typeof first === 'object' && first.path === undefined && !(first instanceof net.Server)) {
        args[0] = { ...first, host: HOST };
    } else if (first === undefined || typeof first === 'function') {
        args.unshift(0, HOST);
    }
    this.once('listening', () => {
        const addr = this.address();
        if (addr && typeof addr === 'object') process.stdout.write(JSON.stringify({ listening: `${addr.address}:${addr.port}`, port: addr.port }) + '\n');
    });
    return origListen.apply(this, args);
};
