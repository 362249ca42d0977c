import { createServer } from 'node:http';

/**
 * The webhook receiver for the fanout benchmark, in a process of its own so neither the worker
 * nor the ceiling's client shares its event loop. It reads each body and answers 200.
 */
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.stdout.write(`${JSON.stringify({ msg: 'receiver listening', port })}\n`);
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
