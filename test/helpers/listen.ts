import { after } from 'node:test';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';

/**
 * Listens on an ephemeral loopback port; closed (connections included) when the file ends, unless
 * `closeAfterFile` is false (a benchmark process, not a test file, closes it itself).
 */
export async function listenOnLoopback(server: Server, scheme: 'http' | 'https' = 'http', opts: { closeAfterFile?: boolean } = {}) {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const close = () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  if (opts.closeAfterFile !== false) after(close);
  return { port, url: `${scheme}://127.0.0.1:${port}`, close };
}
