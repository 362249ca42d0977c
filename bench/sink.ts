import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import MailComposer from 'nodemailer/lib/mail-composer';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { createSql } from '../src/platform/db.ts';
import { createProject } from '../src/projects/service.ts';
import { createApiKey } from '../src/keys/service.ts';
import { cpuDuring, freePort, QUICK, ratio, round, spawnRole, spawnService, waitForPort, type BenchContext, type BenchResult } from './support.ts';

/**
 * SMTP messages per second caught, parsed (mailparser) and stored by Mailroom's sink, against
 * postfix's smtp-sink, which reads and discards. Both get the identical load: CONNECTIONS
 * connections of nodemailer's SMTPConnection, authenticated with AUTH PLAIN, each sending the
 * same pre-built message one transaction after another. smtp-source cannot authenticate, and
 * Mailroom's sink refuses unauthenticated mail, so smtp-source only supplies a reference line (its
 * own rate into smtp-sink) showing how much of the ceiling is the client.
 */
const CONNECTIONS = 8;
const MESSAGES = QUICK ? 300 : 3000;
const WARMUP = QUICK ? 50 : 200;
const FROM = 'bench@example.com';
const TO = 'reader@example.com';
const SMTP_SINK = '/usr/sbin/smtp-sink';
const SMTP_SOURCE = '/usr/sbin/smtp-source';

async function composeMessage(): Promise<Buffer> {
  return new MailComposer({
    from: `Bench <${FROM}>`,
    to: TO,
    subject: 'Your receipt',
    text: 'Thanks for your order. '.repeat(40),
    html: `<p>${'Thanks for your order. '.repeat(40)}</p>`,
  }).compile().build();
}

/** An authenticated SMTP connection, ready for transactions. */
async function openConnection(port: number, pass: string): Promise<SMTPConnection> {
  const connection = new SMTPConnection({ host: '127.0.0.1', port, secure: false, ignoreTLS: true });
  await new Promise<void>((resolve, reject) => {
    connection.once('error', reject);
    connection.connect(() => connection.login({ user: 'bench', pass }, (err) => (err ? reject(err) : resolve())));
  });
  return connection;
}

const sendOne = (connection: SMTPConnection, raw: Buffer) => new Promise<void>((resolve, reject) =>
  connection.send({ from: FROM, to: [TO] }, raw, (err) => (err ? reject(err) : resolve())));

/**
 * Sends `count` messages over CONNECTIONS connections, each taking the next message as soon as its
 * last one is answered, after a warm-up on the same connections; the seconds they took and the CPU
 * the server (`pids`) used meanwhile. The connections are nodemailer's SMTPConnection without its
 * Mailer and pool, which would cost the client as much CPU a message as the server's parse, on the
 * same two cores.
 */
async function load(port: number, pass: string, raw: Buffer, count: number, pids: Record<string, number>) {
  const connections = await Promise.all(Array.from({ length: CONNECTIONS }, () => openConnection(port, pass)));
  const send = async (n: number) => {
    let left = n;
    await Promise.all(connections.map(async (connection) => {
      while (left > 0) {
        left--;
        await sendOne(connection, raw);
      }
    }));
  };
  try {
    await send(WARMUP);
    return await cpuDuring(pids, () => send(count));
  } finally {
    for (const connection of connections) connection.quit();
  }
}

/** smtp-source into smtp-sink: the C client and server, the same message, as many sessions. */
async function smtpSourceRate(port: number, raw: Buffer): Promise<number> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mailroom-bench-'));
  try {
    const file = path.join(dir, 'message.eml');
    await writeFile(file, raw.toString('utf8').replace(/\r\n/g, '\n'));
    const started = performance.now();
    await promisify(execFile)(SMTP_SOURCE, ['-d', '-s', String(CONNECTIONS), '-m', String(MESSAGES), '-F', file, '-f', FROM, '-t', TO, `127.0.0.1:${port}`]);
    return MESSAGES / ((performance.now() - started) / 1000);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function postfixCeiling(raw: Buffer) {
  if (!existsSync(SMTP_SINK) || !existsSync(SMTP_SOURCE)) return undefined;
  const port = await freePort();
  // -u: smtp-sink refuses to keep root privileges. It announces AUTH and accepts any login.
  const server = spawnService(SMTP_SINK, ['-u', 'nobody', '-m', '256', `127.0.0.1:${port}`, '256']);
  try {
    await waitForPort(port);
    const { seconds } = await load(port, 'any-password', raw, MESSAGES, { smtp_sink: server.pid });
    return { rate: MESSAGES / seconds, smtpSource: await smtpSourceRate(port, raw) };
  } finally {
    await server.stop();
  }
}

export async function sink(ctx: BenchContext): Promise<BenchResult> {
  const sql = createSql(ctx.databaseUrl, { max: 2 });
  const raw = await composeMessage();
  try {
    const project = await createProject(sql, 'bench sink');
    const { key } = await createApiKey(sql, project.id, 'bench');
    const worker = spawnRole('worker', { ...ctx.env, SINK_SMTP_PORT: '0', SINK_MAX_MESSAGES: String(WARMUP + MESSAGES) });
    let seconds: number;
    let cpu: Record<string, number>;
    try {
      const { port } = await worker.logLine('smtp sink listening');
      await worker.logLine('worker running');
      ({ seconds, cpu } = await load(Number(port), key, raw, MESSAGES, { worker: worker.pid }));
    } finally {
      await worker.stop();
    }
    const [{ stored }] = await sql<[{ stored: number }]>`select count(*)::int as stored from sink_messages where project_id = ${project.id}`;
    if (stored !== WARMUP + MESSAGES) throw new Error(`the sink stored ${stored} messages, expected ${WARMUP + MESSAGES}`);

    const postfix = await postfixCeiling(raw);
    const rate = MESSAGES / seconds;
    return {
      bench: 'sink',
      rate_per_s: round(rate),
      ceiling: postfix ? 'postfix smtp-sink' : 'postfix smtp-sink (not installed: apt-get install postfix)',
      ceiling_per_s: postfix ? round(postfix.rate) : null,
      ratio: ratio(rate, postfix?.rate ?? null),
      load: `nodemailer SMTPConnection to both, ${CONNECTIONS} connections with AUTH PLAIN, ${MESSAGES} messages of ${raw.length} bytes`,
      smtp_source_into_smtp_sink_per_s: postfix ? round(postfix.smtpSource) : null,
      messages: MESSAGES,
      concurrency: CONNECTIONS,
      cpu_s: cpu,
    };
  } finally {
    await sql.end();
  }
}
