import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import { listenOnLoopback } from './listen.ts';

/** Names the certificate covers; tests point an injected resolver at 127.0.0.1 for them. */
export const CERT_NAMES = ['localhost', 'hooks.test', '*.hooks.test'];

export type TlsPair = { key: string; cert: string };

/** A self-signed certificate made by the `openssl` CLI for this run; it doubles as its own CA. */
export function selfSignedCertificate(): TlsPair {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-tls-'));
  try {
    const san = [...CERT_NAMES.map((n) => `DNS:${n}`), 'IP:127.0.0.1', 'IP:::1'].join(',');
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'),
      '-days', '2', '-subj', '/CN=mailroom test receiver', '-addext', `subjectAltName=${san}`,
    ], { stdio: 'pipe' });
    return { key: readFileSync(path.join(dir, 'key.pem'), 'utf8'), cert: readFileSync(path.join(dir, 'cert.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export type Received = {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  /** The raw bytes, as a receiver must verify them. */
  body: Buffer;
  at: number;
};

/** How to answer a request; the default answers 200 `ok`. */
export type Responder = (req: Received, res: ServerResponse) => void;

export type Receiver = {
  port: number;
  /** `https://<host>:<port><path>`; the host defaults to 127.0.0.1. */
  url(pathname?: string, host?: string): string;
  requests: Received[];
  /** TCP connections accepted, whether or not a request followed. */
  connections(): number;
  respond(responder: Responder): void;
  close(): Promise<void>;
};

/** An HTTPS server on 127.0.0.1, port 0, recording every request; closed after the test file. */
export async function startHttpsReceiver(tls: TlsPair): Promise<Receiver> {
  const requests: Received[] = [];
  let responder: Responder = (_req, res) => { res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'); };
  let connections = 0;
  const server: Server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received = { method: req.method!, path: req.url!, headers: req.headers, body: Buffer.concat(chunks), at: Date.now() };
      requests.push(received);
      responder(received, res);
    });
  });
  server.on('connection', () => { connections++; });
  const { port, close } = await listenOnLoopback(server as never, 'https');
  return {
    port,
    url: (pathname = '/hook', host = '127.0.0.1') => `https://${host}:${port}${pathname}`,
    requests,
    connections: () => connections,
    respond(r) { responder = r; },
    close,
  };
}
