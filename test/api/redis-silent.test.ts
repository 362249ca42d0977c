import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { createTestContext } from '../helpers/app.ts';
import { RedisRateLimiter } from '../../src/http/rate-limit.ts';
import { createRedis } from '../../src/platform/redis.ts';
import { createLogger } from '../../src/platform/log.ts';

/** The command names in a buffer of RESP arrays (`*N` then N bulk strings). */
function commandNames(data: string): string[] {
  const lines = data.split('\r\n');
  const names: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.startsWith('*')) continue;
    const argc = Number(lines[i]!.slice(1));
    names.push(lines[i + 2]!.toLowerCase());
    i += argc * 2;
  }
  return names;
}

// A Redis that completes the connection handshake and its ready check, then never answers again.
const sockets = new Set<Socket>();
const silent = createServer((socket) => {
  sockets.add(socket);
  socket.on('data', (chunk) => {
    for (const name of commandNames(chunk.toString())) {
      if (name === 'hello') socket.write('%2\r\n+server\r\n+redis\r\n+proto\r\n:3\r\n');
      else if (name === 'client') socket.write('+OK\r\n');
      else if (name === 'info') {
        const info = '# Server\r\nredis_version:7.0.0\r\nloading:0\r\n';
        socket.write(`$${Buffer.byteLength(info)}\r\n${info}\r\n`);
      }
    }
  });
});
await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
const redis = createRedis(`redis://127.0.0.1:${(silent.address() as { port: number }).port}`, createLogger('silent'));
after(async () => {
  redis.disconnect();
  for (const s of sockets) s.destroy();
  await new Promise((r) => silent.close(r));
});
await new Promise((r) => (redis.status === 'ready' ? r(null) : redis.once('ready', r)));

const ctx = await createTestContext({ limiter: new RedisRateLimiter(redis, createLogger('silent')) });
const { key } = await ctx.tenant();

test('a Redis that never answers leaves every request answered within 1 s, unlimited, and readiness at 503', async () => {
  for (const [path, auth] of [['/v1/emails', key], ['/v1/api-keys', key], ['/v1/emails', 'sk_wrong']] as const) {
    const started = Date.now();
    const res = await ctx.call(auth, path);
    const took = Date.now() - started;
    assert.ok(took < 1000, `${path} took ${took} ms`);
    assert.equal(res.status, auth === key ? 200 : 401, path);
  }
  const started = Date.now();
  const ready = await ctx.call(undefined, '/readyz');
  assert.ok(Date.now() - started < 1500);
  assert.equal(ready.status, 503);
  assert.deepEqual(await ready.json(), { status: 'not_ready', dependencies: { database: true, cache: false } });
});
