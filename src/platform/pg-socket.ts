import net from 'node:net';

/** How long a connected socket may wait for postgres.js's first bytes before it is known stuck. */
const FIRST_WRITE_MS = 100;

/**
 * The sockets postgres.js 3.4.9 opens, made to survive a flaw of its write scheduler
 * (porsager/postgres#1176, LanternOps/breeze#3225). postgres.js buffers small writes and
 * flushes them on `setImmediate`; when a connection closes with a flush pending, it cancels the
 * flush without forgetting it. That connection (postgres.js reuses it for the pool's life) then
 * never writes again: every reconnect buffers its startup message behind the stale flush, the
 * server waits on a silent socket, and queries routed to it wait for `connect_timeout` (30 s),
 * over and over. It is what a database restart leaves behind under load, and a server shutting
 * down waits for those silent sockets too.
 *
 * Two defences, neither reaching into postgres.js:
 * - A socket's `close` reaches postgres.js one turn of the event loop late, so a flush already
 *   pending runs first (onto the dead socket, which fails it harmlessly) and is forgotten as it
 *   should be.
 * - A socket that connected and was handed nothing to write within 100 ms belongs to a
 *   connection that is stuck: it is ended at once. postgres.js connects again, and each attempt
 *   adds its startup message to the stale buffer until the buffer is large enough to be written
 *   straight away; the server refuses those bytes, and the connection is clean from then on. A
 *   stuck connection is back in about a second instead of never or in minutes.
 */
export function postgresSocket(options: { host: string[]; port: number[]; path?: string }): net.Socket {
  const socket = new CloseLateSocket();
  // postgres.js reads these for TLS's server name and its error messages.
  const host = options.host[0] ?? '127.0.0.1';
  const port = options.port[0] ?? 5432;
  Object.assign(socket, { host, port });
  if (options.path) socket.connect(options.path);
  else socket.connect(port, host);
  // Watched from here: `connect` puts net.Socket's own `write` back on the socket.
  let wrote = false;
  const write = socket.write.bind(socket) as net.Socket['write'];
  socket.write = ((...args: Parameters<net.Socket['write']>) => {
    wrote = true;
    return write(...args);
  }) as net.Socket['write'];
  socket.once('connect', () => {
    setTimeout(() => {
      // Ended without an error: postgres.js keeps the query that was waiting and connects again.
      if (!wrote && !socket.destroyed) socket.destroy();
    }, FIRST_WRITE_MS).unref();
  });
  return socket;
}

/** A socket whose `close` is delivered after the callbacks already queued with `setImmediate`. */
class CloseLateSocket extends net.Socket {
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event !== 'close') return super.emit(event, ...args);
    setImmediate(() => super.emit('close', ...args));
    return true;
  }
}
