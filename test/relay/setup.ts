import { mkdtemp, writeFile } from 'node:fs/promises';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { generate } from 'selfsigned';
import { createTestContext, type TestContext } from '../helpers/app.ts';
import { beforeDrop } from '../helpers/db.ts';
import { startRelay, type RelayServer } from '../../src/relay/server.ts';
import { createLogger } from '../../src/platform/log.ts';
import type { RateLimiter } from '../../src/http/rate-limit.ts';

let made: Promise<{ certFile: string; keyFile: string; cert: string }> | undefined;


/** A certificate for localhost in a temporary directory, as an operator would give it (one per test file). */
export function testCertificate() {
  made ??= makeCertificate();
  return made;
}

async function makeCertificate() {
  const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-relay-'));
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], { keySize: 2048, algorithm: 'sha256' });
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  await writeFile(certFile, pems.cert);
  await writeFile(keyFile, pems.private);
  return { certFile, keyFile, cert: pems.cert };
}

export type RelayContext = TestContext & { relay: RelayServer; port: number; smtpsPort?: number; cert: string };

/**
 * A test database, the in-process API, and the relay on ephemeral loopback ports, with TLS from
 * a fresh certificate, in production mode unless `env` says otherwise.
 */
export async function startTestRelay(opts: { env?: Record<string, string>; limiter?: RateLimiter; smtps?: boolean } = {}): Promise<RelayContext> {
  const cert = await testCertificate();
  const ctx = await createTestContext({
    limiter: opts.limiter,
    env: {
      RELAY_SMTP_PORT: '0',
      RELAY_SMTP_HOST: '127.0.0.1',
      RELAY_TLS_CERT: cert.certFile,
      RELAY_TLS_KEY: cert.keyFile,
      ...(opts.smtps ? { RELAY_SMTPS_PORT: '0' } : {}),
      ...opts.env,
    },
  });
  const relay = await startRelay({ config: ctx.config, sql: ctx.sql, log: createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test-relay'), limiter: ctx.deps.limiter });
  beforeDrop(() => relay.close());
  const port = relay.listeners.find((l) => l.kind === 'starttls')!.port;
  const smtpsPort = relay.listeners.find((l) => l.kind === 'implicit-tls')?.port;
  return { ...ctx, relay, port, smtpsPort, cert: cert.cert };
}

/**
 * A raw SMTP conversation, for exact replies: `command` writes a line (or raw bytes) and answers
 * the complete reply, multi-line ones joined with newlines.
 */
export class SmtpSession {
  private buffer = '';
  private waiting: ((reply: string) => void) | undefined;
  private replies: string[] = [];
  closed = false;
  greeting = '';

  private constructor(private socket: Socket | TLSSocket) {
    this.listen();
  }

  private listen() {
    this.socket.on('data', (chunk: Buffer) => {
      this.buffer += chunk.toString('latin1');
      for (;;) {
        const m = /^(?:\d{3}-[^\r\n]*\r\n)*\d{3}(?: [^\r\n]*)?\r\n/.exec(this.buffer);
        if (!m) break;
        this.buffer = this.buffer.slice(m[0].length);
        this.replies.push(m[0].trimEnd().replace(/\r\n/g, '\n'));
      }
      this.flush();
    });
    this.socket.on('close', () => { this.closed = true; this.flush(); });
    this.socket.on('error', () => {});
  }

  private flush() {
    if (this.waiting && (this.replies.length || this.closed)) {
      const w = this.waiting;
      this.waiting = undefined;
      w(this.replies.shift() ?? '(closed)');
    }
  }

  static async open(port: number, opts: { tls?: boolean } = {}): Promise<SmtpSession> {
    const socket = opts.tls
      ? tlsConnect({ port, host: '127.0.0.1', rejectUnauthorized: false })
      : netConnect({ port, host: '127.0.0.1' });
    await new Promise<void>((resolve, reject) => socket.once(opts.tls ? 'secureConnect' : 'connect', resolve).once('error', reject));
    const session = new SmtpSession(socket);
    session.greeting = await session.reply();
    return session;
  }

  reply(timeoutMs = 10_000): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no SMTP reply within ${timeoutMs} ms`)), timeoutMs);
      this.waiting = (r) => { clearTimeout(timer); resolve(r); };
      this.flush();
    });
  }

  async command(line: string | Buffer): Promise<string> {
    this.socket.write(typeof line === 'string' ? `${line}\r\n` : line);
    return this.reply();
  }

  /** EHLO, STARTTLS and EHLO again on the encrypted channel. */
  async startTls(): Promise<void> {
    await this.command('EHLO client.test');
    const ready = await this.command('STARTTLS');
    if (!ready.startsWith('220')) throw new Error(`STARTTLS refused: ${ready}`);
    const plain = this.socket;
    plain.removeAllListeners('data');
    const secure = tlsConnect({ socket: plain, rejectUnauthorized: false, servername: 'localhost' });
    await new Promise<void>((resolve, reject) => secure.once('secureConnect', resolve).once('error', reject));
    this.socket = secure;
    this.listen();
    await this.command('EHLO client.test');
  }

  async auth(key: string): Promise<string> {
    return this.command(`AUTH PLAIN ${Buffer.from(`\0mailroom\0${key}`).toString('base64')}`);
  }

  /** MAIL, RCPT for each, DATA and the message (dot-stuffed here), answering DATA's final reply (within `timeoutMs`). */
  async send(from: string, to: string[], message: Buffer | string, mailArgs = '', timeoutMs = 10_000): Promise<string> {
    const mail = await this.command(`MAIL FROM:<${from}>${mailArgs}`);
    if (!mail.startsWith('250')) return mail;
    for (const r of to) {
      const rcpt = await this.command(`RCPT TO:<${r}>`);
      if (!rcpt.startsWith('250')) return rcpt;
    }
    const go = await this.command('DATA');
    if (!go.startsWith('354')) return go;
    const body = Buffer.isBuffer(message) ? message : Buffer.from(message);
    const stuffed = Buffer.from(body.toString('latin1').replace(/(^|\r\n)\./g, '$1..'), 'latin1');
    const end = stuffed.subarray(-2).toString() === '\r\n' ? '.\r\n' : '\r\n.\r\n';
    this.socket.write(Buffer.concat([stuffed, Buffer.from(end)]));
    return this.reply(timeoutMs);
  }

  close() {
    this.socket.destroy();
  }
}

/** A plain message with CRLF line ends. */
export function message(headers: Record<string, string>, body = 'Hello from the relay.'): string {
  return `${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n${body}\r\n`;
}

export const emailIdOf = (reply: string) => /queued as (email_[0-9A-Z]{26})$/.exec(reply)?.[1];

/**
 * A multipart/alternative message whose text (quoted-printable) and html (base64) both read
 * "Grüße, Ann.", under `headers` (From, To, Subject).
 */
export function multipartMessage(headers: Record<string, string>): string {
  return message({ ...headers, 'MIME-Version': '1.0', 'Content-Type': 'multipart/alternative; boundary="b1"' }, [
    '--b1',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: quoted-printable',
    '',
    'Gr=C3=BC=C3=9Fe, Ann.',
    '--b1',
    'Content-Type: text/html; charset=utf-8',
    'Content-Transfer-Encoding: base64',
    '',
    Buffer.from('<p>Grüße, <b>Ann</b>.</p>').toString('base64'),
    '--b1--',
  ].join('\r\n'));
}
