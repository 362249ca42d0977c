import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { adminUrl } from '../helpers/db.ts';
import { spawnEntry } from '../helpers/process.ts';

/** The message PostgreSQL sends a connection that `pg_terminate_backend` ends. */
function terminatedByAdministrator(): Buffer {
  const fields = Buffer.from('SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0');
  const header = Buffer.alloc(5);
  header.write('E', 0);
  header.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([header, fields]);
}

/**
 * A TCP proxy to the test PostgreSQL that ends the first connection whose client sends postgres.js's
 * array-types query, as the server does to every connection in a restart, and passes all else.
 */
async function proxyEndingTheFirstTypeFetch() {
  const target = new URL(adminUrl());
  const upstreamPort = Number(target.port || 5432);
  const upstreamHost = target.hostname;
  let ended = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(upstreamPort, upstreamHost);
    upstream.on('data', (d) => client.write(d));
    client.on('data', (d) => {
      if (ended === 0 && d.includes('pg_catalog.pg_type')) {
        ended++;
        client.end(terminatedByAdministrator());
        upstream.destroy();
        return;
      }
      upstream.write(d);
    });
    for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
      a.on('error', () => b.destroy());
      a.on('close', () => b.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  target.host = `127.0.0.1:${port}`;
  return { url: String(target), ended: () => ended, close: () => new Promise<void>((r) => server.close(() => r())) };
}

test('a connection the server ends while postgres.js sets it up costs one query an error, not the process', async () => {
  const proxy = await proxyEndingTheFirstTypeFetch();
  try {
    const client = spawnEntry('test/helpers/rejections-client.ts', { DATABASE_URL: proxy.url });
    const code = await client.exited;
    assert.equal(proxy.ended(), 1, 'the proxy ended a connection during its setup');
    assert.equal(code, 0, `the process ran to its end:\n${client.stdout()}${client.stderr()}`);
    assert.match(client.stdout(), /^answered 1$/m);
    assert.match(client.stdout(), /a database connection ended while it was being set up; the pool opens another/);
    assert.match(client.stdout(), /^carried on$/m);
  } finally {
    await proxy.close();
  }
});

test('graphile-worker failing to give back its fetched jobs as its pool stops is logged, not the end of the process', async () => {
  const client = spawnEntry('test/helpers/rejections-client.ts', {
    REJECT: 'Error occurred whilst returning jobs from local queue to database queue: Connection terminated unexpectedly',
  });
  assert.equal(await client.exited, 0, client.stderr());
  assert.match(client.stdout(), /a stopped job runner could not give back the jobs it had fetched; the dead-pool sweep releases them/);
  assert.match(client.stdout(), /^carried on$/m);
});

test('any other unhandled rejection still ends the process, as Node does by default', async () => {
  const client = spawnEntry('test/helpers/rejections-client.ts', { REJECT: 'something nobody expected' });
  assert.equal(await client.exited, 1);
  assert.match(client.stderr(), /something nobody expected/);
  assert.doesNotMatch(client.stdout(), /carried on/);
});
