import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import postgres from 'postgres';
import { adminUrl } from '../helpers/db.ts';
import { postgresSocket } from '../../src/platform/pg-socket.ts';

type SocketOptions = { host: string[]; port: number[]; path?: string };

/**
 * A one-connection postgres.js pool whose sockets the test can reach, made by `make`. The
 * connection ends (as when the server restarts) while a query's bytes wait to be flushed.
 */
async function queryAfterLostFlush(make: (o: SocketOptions) => net.Socket, { closeFirst }: { closeFirst: boolean }) {
  const sockets: net.Socket[] = [];
  const sql = postgres(adminUrl(), {
    max: 1, connect_timeout: 3, onnotice: () => {},
    ...({ socket: (o: SocketOptions) => { const s = make(o); sockets.push(s); return s; } } as object),
  });
  try {
    await sql`select 1`;
    const socket = sockets.at(-1)!;
    // The close is delivered while a query's bytes wait on setImmediate to be flushed, as when
    // the server's end of a connection arrives in the same turn as a new query.
    if (closeFirst) {
      // Even a late close cannot help a flush queued after it: the connection is left stuck.
      socket.emit('close', false);
      sql`select 2`.execute().catch(() => {});
    } else {
      setImmediate(() => socket.emit('close', false));
      sql`select 2`.execute().catch(() => {});
    }
    await new Promise((r) => setTimeout(r, 20));
    socket.destroy();
    const started = performance.now();
    const outcome = await sql<[{ n: number }]>`select 3 as n`.then((rows) => rows[0].n, (err: Error & { code?: string }) => err.code ?? err.message);
    return { outcome, ms: performance.now() - started };
  } finally {
    await sql.end({ timeout: 1 });
  }
}

const plainSocket = (o: SocketOptions) => net.connect(o.port[0]!, o.host[0]!);

test('postgres.js 3.4.9 alone: a connection that ends with a flush pending never writes again (the flaw pg-socket works around)', async () => {
  const { outcome } = await queryAfterLostFlush(plainSocket, { closeFirst: false });
  assert.equal(outcome, 'CONNECT_TIMEOUT');
});

test('a connection that ends with a flush pending answers the next query at once', async () => {
  const { outcome, ms } = await queryAfterLostFlush(postgresSocket, { closeFirst: false });
  assert.equal(outcome, 3);
  assert.ok(ms < 1000, `answered in ${Math.round(ms)} ms`);
});

test('a connection left stuck (its flush queued after the close) is ended and connected again, and answers within seconds', async () => {
  const { outcome, ms } = await queryAfterLostFlush(postgresSocket, { closeFirst: true });
  assert.equal(outcome, 3);
  assert.ok(ms < 2500, `answered in ${Math.round(ms)} ms`);
});

