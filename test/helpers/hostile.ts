import type { AddressInfo } from 'node:net';
import { after } from 'node:test';
import { serve } from '@hono/node-server';
import type { App } from '../../src/http/app.ts';
import { readBodies } from '../../src/platform/mime-pool.ts';

/**
 * §22.1's bound: every /healthz probe beside a hostile message answers within this. A host far
 * busier than its cores (a shared CI box) can raise it with TEST_HEALTHZ_BOUND_MS; the old code's
 * stalls were 16 to 30 s, so a bound of seconds still tells them apart.
 */
export const HEALTHZ_BOUND_MS = Number(process.env.TEST_HEALTHZ_BOUND_MS ?? 250);

/**
 * The in-process app on a real loopback port, so a probe from another process waits on this
 * process's event loop, the one the parse of a hostile message would hold.
 */
export async function serveApp(app: App): Promise<string> {
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  after(() => new Promise<void>((resolve) => { server.close(() => resolve()); (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.(); }));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export { whileProbing } from './responsiveness.ts';

/** A message whose text body is 200,000 lines `Op a` (1.2 MB): quadratic for JavaScript reply parsers. */
export function opaMessage(to: string): Buffer {
  return Buffer.from([
    'From: Ann <ann@example.net>', `To: ${to}`, 'Subject: Op a', `Message-ID: <opa-${Date.now()}-${Math.random()}@example.net>`,
    'Content-Type: text/plain; charset=utf-8', '', 'Op a\r\n'.repeat(200_000),
  ].join('\r\n'));
}

/** A quoted-printable text part of 10 MiB whose lines are 997 spaces and an `x` (soft breaks). */
export function qpMessage(headers: Record<string, string>, mib = 10): Buffer {
  const line = `${' '.repeat(997)}x=\r\n`;
  const body = line.repeat(Math.ceil((mib * 1024 * 1024) / line.length));
  return Buffer.from([
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    'MIME-Version: 1.0', 'Content-Type: text/plain; charset=us-ascii', 'Content-Transfer-Encoding: quoted-printable', '', body,
  ].join('\r\n'));
}

/** A multipart message one of whose parts has a header of `bytes` (one long X- field). */
export function hugePartHeaderMessage(to: string, bytes = 2 * 1024 * 1024): Buffer {
  return Buffer.from([
    'From: Ann <ann@example.net>', `To: ${to}`, 'Subject: A part header of 2 MiB', 'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b1"', '', '--b1', 'Content-Type: text/plain', '', 'Hello.', '--b1',
    'Content-Type: application/octet-stream', `X-Filler: ${'a'.repeat(bytes)}`, '', 'AAAA', '--b1--', '',
  ].join('\r\n'));
}

/**
 * Starts the pool's threads and loads the parser in each, outside any probe window: a thread's
 * first start (loading its modules) is a cost of the machine's, not of the message.
 */
export async function warmMimePool(threads = 2) {
  const raw = Buffer.from('From: a@example.com\r\nSubject: warm\r\n\r\nHello.\r\n');
  await Promise.all(Array.from({ length: threads }, () => readBodies(raw)));
}
