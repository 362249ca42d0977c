import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createTestContext } from '../helpers/app.ts';

const ctx = await createTestContext();
const server = serve({ fetch: ctx.app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
after(() => new Promise((r) => server.close(r)));
const port = (server.address() as AddressInfo).port;

/**
 * Sends a request head, then keeps writing body bytes (up to `total`) until an answer arrives.
 * Returns the status line and how many body bytes had been written when it came.
 */
function uploadUntilAnswered(head: string, total: number, chunked: boolean): Promise<{ status: number; sentWhenAnswered: number }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let sent = 0;
    let answer = '';
    let answered = false;
    const piece = Buffer.alloc(16 * 1024, 'a');
    const pump = () => {
      while (!answered && sent < total) {
        const frame = chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece;
        sent += piece.length;
        if (!socket.write(frame)) { socket.once('drain', pump); return; }
      }
    };
    socket.on('connect', () => { socket.write(head); pump(); });
    socket.on('data', (d) => {
      answer += d.toString('latin1');
      if (!answered && answer.includes('\r\n')) {
        answered = true;
        resolve({ status: Number(answer.split(' ')[1]), sentWhenAnswered: sent });
        socket.destroy();
      }
    });
    socket.on('error', (err) => { if (!answered) reject(err); });
  });
}

const SIXTY_FOUR_MIB = 64 * 1024 * 1024;

test('a huge Content-Length is answered 413 at once, before any session or CSRF check', async () => {
  const head = `POST /dashboard/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${SIXTY_FOUR_MIB}\r\n\r\n`;
  const { status, sentWhenAnswered } = await uploadUntilAnswered(head, SIXTY_FOUR_MIB, false);
  assert.equal(status, 413);
  assert.ok(sentWhenAnswered < SIXTY_FOUR_MIB, `answered while the body was still being sent (${sentWhenAnswered} bytes)`);
});

test('a chunked body is cut off at 64 KiB with 413, and memory stays flat', async () => {
  const rssBefore = process.memoryUsage().rss;
  const head = 'POST /dashboard/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n';
  const { status, sentWhenAnswered } = await uploadUntilAnswered(head, SIXTY_FOUR_MIB, true);
  const rssAfter = process.memoryUsage().rss;
  assert.equal(status, 413);
  assert.ok(sentWhenAnswered < SIXTY_FOUR_MIB / 4, `answered after ${sentWhenAnswered} bytes`);
  const growthMiB = (rssAfter - rssBefore) / 1024 / 1024;
  process.stdout.write(`# dashboard 64 MiB chunked POST: RSS ${(rssBefore / 1048576).toFixed(1)} MiB before, ${(rssAfter / 1048576).toFixed(1)} MiB after\n`);
  assert.ok(growthMiB < 32, `RSS grew ${growthMiB.toFixed(1)} MiB`);
});

test('a form under the limit still reaches the CSRF check', async () => {
  const res = await ctx.app.request('/dashboard/login', {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'email=a%40b.c&password=x',
  });
  assert.equal(res.status, 403, 'refused by CSRF, not by size');
});

test('the streamed import upload, the one path past the limit, is refused before its body is read without a valid token', async () => {
  const { projectId } = await ctx.tenant('uploads');
  const head = `POST /dashboard/projects/${projectId}/imports?_csrf=${'f'.repeat(64)} HTTP/1.1\r\nHost: 127.0.0.1\r\n`
    + 'Content-Type: multipart/form-data; boundary=x\r\nTransfer-Encoding: chunked\r\n\r\n';
  const { status, sentWhenAnswered } = await uploadUntilAnswered(head, SIXTY_FOUR_MIB, true);
  assert.equal(status, 403);
  assert.ok(sentWhenAnswered < SIXTY_FOUR_MIB / 4, `answered after ${sentWhenAnswered} bytes`);
  assert.equal((await ctx.sql`select 1 from contact_imports where project_id = ${projectId}`).length, 0);
});
