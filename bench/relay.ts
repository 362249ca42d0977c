import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import MailComposer from 'nodemailer/lib/mail-composer';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { generate } from 'selfsigned';
import { PipeliningSmtpClient } from './smtp-client.ts';
import { EMAIL, CONCURRENCY as ACCEPT_CONNECTIONS, wrk } from './accept.ts';
import { apiWithKey, cpuDuring, freePort, peakRssMb, QUICK, ratio, round, spawnService, waitForPort, type BenchContext, type BenchResult } from './support.ts';

/**
 * SMTP submissions per second through the relay (§13): CONNECTIONS STARTTLS connections with AUTH
 * PLAIN, each sending one message after another, every one answered only once its email is
 * committed as `queued` (no worker runs). Ceilings in the same run: `accept` (the same message as
 * `POST /v1/emails` JSON, wrk at accept's 32 connections, against the same API process) and
 * postfix's smtp-sink (which reads and discards, and has no TLS). Last, both loads at once, for
 * the API's peak RSS while it serves HTTP and SMTP together.
 */
const CONNECTIONS = 8;
const MESSAGES = QUICK ? 300 : 2000;
const WARMUP = QUICK ? 50 : 200;
/**
 * The relay and its accept ceiling are measured in turns, ROUNDS of each, and each rate is pooled
 * over its rounds: the machine's speed drifts over seconds, and one window of each, one after the
 * other, let that drift decide their ratio.
 */
const ROUNDS = QUICK ? 1 : 3;
const ACCEPT_SECONDS = 2;
const FROM = 'bench@example.com';
const SMTP_SINK = '/usr/sbin/smtp-sink';

/** accept's message as MIME, without its Message-ID: each send gets its own, as a real client's would. */
async function composeMessage(): Promise<Buffer> {
  const raw = await new MailComposer({ ...EMAIL, messageId: '<x@x>' }).compile().build();
  return Buffer.from(raw.toString('latin1').replace(/^Message-ID: <x@x>\r\n/m, ''), 'latin1');
}

let sequence = 0;
const withMessageId = (raw: Buffer) => Buffer.concat([Buffer.from(`Message-ID: <bench-${process.pid}-${++sequence}@example.com>\r\n`), raw]);

type Client = 'pipelining' | 'nodemailer';
type Sender = { send(raw: Buffer, more: boolean): Promise<string>; quit(): void };

async function openConnection(port: number, pass: string, tls: boolean, client: Client): Promise<Sender> {
  if (client === 'pipelining') {
    const connection = await PipeliningSmtpClient.connect({ host: '127.0.0.1', port, starttls: tls, auth: tls ? { user: 'mailroom', pass } : undefined });
    return { send: (raw, more) => connection.send(FROM, EMAIL.to[0]!, raw, more), quit: () => connection.quit() };
  }
  const connection = new SMTPConnection({
    host: '127.0.0.1', port, secure: false, ...(tls ? { requireTLS: true, tls: { rejectUnauthorized: false } } : { ignoreTLS: true }),
  });
  await new Promise<void>((resolve, reject) => {
    connection.once('error', reject);
    connection.connect(() => connection.login({ user: 'mailroom', pass }, (err) => (err ? reject(err) : resolve())));
  });
  return {
    send: (raw) => new Promise<string>((resolve, reject) =>
      connection.send({ from: FROM, to: [EMAIL.to[0]!] }, raw, (err, info) => (err ? reject(err) : resolve(String(info.response))))),
    quit: () => connection.quit(),
  };
}

/**
 * `count` messages over CONNECTIONS connections (after a warm-up on them), each connection taking
 * the next as soon as its last is answered: the seconds, each message's latency, and the CPU the
 * processes in `pids` used meanwhile.
 */
async function load(port: number, pass: string, raw: Buffer, count: number, pids: Record<string, number>, opts: { tls: boolean; client: Client; expect?: RegExp }) {
  const connections = await Promise.all(Array.from({ length: CONNECTIONS }, () => openConnection(port, pass, opts.tls, opts.client)));
  const latencies: number[] = [];
  const send = async (n: number, record: boolean) => {
    let left = n;
    await Promise.all(connections.map(async (connection) => {
      if (left <= 0) return;
      left--;
      for (;;) {
        // Whether this connection sends another after this one, so a pipelining client can say so.
        const more = left > 0;
        if (more) left--;
        const started = performance.now();
        const reply = await connection.send(withMessageId(raw), more);
        if (record) latencies.push(performance.now() - started);
        if (opts.expect && !opts.expect.test(reply)) throw new Error(`unexpected reply: ${reply}`);
        if (!more) break;
      }
    }));
  };
  try {
    await send(WARMUP, false);
    const measured = await cpuDuring(pids, () => send(count, true));
    return { ...measured, ...percentiles(latencies), latencies };
  } finally {
    for (const connection of connections) connection.quit();
  }
}

function percentiles(latencies: number[]) {
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50Ms: at(0.5), p99Ms: at(0.99) };
}

async function postfixCeiling(raw: Buffer) {
  if (!existsSync(SMTP_SINK)) return undefined;
  const port = await freePort();
  const server = spawnService(SMTP_SINK, ['-u', 'nobody', '-m', '256', `127.0.0.1:${port}`, '256']);
  try {
    await waitForPort(port);
    const { seconds } = await load(port, 'any-password', raw, MESSAGES, { smtp_sink: server.pid }, { tls: false, client: 'pipelining' });
    return MESSAGES / seconds;
  } finally {
    await server.stop();
  }
}

export async function relay(ctx: BenchContext): Promise<BenchResult> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mailroom-bench-relay-'));
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], { keySize: 2048, algorithm: 'sha256' });
  await writeFile(path.join(dir, 'cert.pem'), pems.cert);
  await writeFile(path.join(dir, 'key.pem'), pems.private);
  const { sql, projectId, key, api } = await apiWithKey(ctx, 'bench relay', {
    RELAY_SMTP_PORT: '0', RELAY_SMTP_HOST: '127.0.0.1', RELAY_TLS_CERT: path.join(dir, 'cert.pem'), RELAY_TLS_KEY: path.join(dir, 'key.pem'),
  });
  const raw = await composeMessage();
  try {
    const rounds: Array<{ smtp: Awaited<ReturnType<typeof load>>; accepted: Awaited<ReturnType<typeof wrk>> }> = [];
    let viaNodemailer: Awaited<ReturnType<typeof load>>;
    let medianBatch: number;
    let both: { smtpPerS: number; httpPerS: number };
    let rss: number;
    try {
      const { url } = await api.logLine('api listening');
      const listening = await api.logLine('smtp relay listening') as { listeners: Array<{ port: number }> };
      const port = listening.listeners[0]!.port;
      const queued = /^250 2\.0\.0 OK queued as email_/;
      await wrk(String(url), key, 1);
      for (let i = 0; i < ROUNDS; i++) {
        const smtp = await load(port, key, raw, MESSAGES, { api: api.pid }, { tls: true, client: 'pipelining', expect: queued });
        rounds.push({ smtp, accepted: await wrk(String(url), key, ACCEPT_SECONDS) });
      }
      // Rows committed together share their inserting transaction id: that is the batch size.
      const batches = await sql<{ size: number }[]>`select count(*)::int as size from emails where project_id = ${projectId} and source = 'smtp' group by xmin::text order by 1`;
      medianBatch = batches[Math.floor(batches.length / 2)]?.size ?? 1;
      viaNodemailer = await load(port, key, raw, MESSAGES, { api: api.pid }, { tls: true, client: 'nodemailer', expect: queued });
      // Both at once, for the API's memory with HTTP and SMTP load together.
      const [together, http] = await Promise.all([
        load(port, key, raw, MESSAGES, { api: api.pid }, { tls: true, client: 'pipelining' }),
        wrk(String(url), key, ACCEPT_SECONDS),
      ]);
      both = { smtpPerS: round(MESSAGES / together.seconds), httpPerS: round(http.requests / http.seconds) };
      rss = peakRssMb(api.pid);
    } finally {
      await api.stop();
    }
    // Every answered submission is one durable queued email, besides what HTTP accepted.
    const sent = (ROUNDS + 2) * (WARMUP + MESSAGES);
    const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId} and source = 'smtp' and status = 'queued'`;
    if (n !== sent) throw new Error(`expected ${sent} queued smtp emails, found ${n}`);

    const postfix = await postfixCeiling(raw);
    const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
    const rate = (ROUNDS * MESSAGES) / sum(rounds.map((r) => r.smtp.seconds));
    const acceptRate = sum(rounds.map((r) => r.accepted.requests)) / sum(rounds.map((r) => r.accepted.seconds));
    const smtp = percentiles(rounds.flatMap((r) => r.smtp.latencies));
    const cpu: Record<string, number> = {};
    for (const r of rounds) for (const [name, seconds] of Object.entries(r.smtp.cpu)) cpu[name] = round((cpu[name] ?? 0) + seconds, 2);
    return {
      bench: 'relay',
      rate_per_s: round(rate),
      p50_ms: round(smtp.p50Ms, 2),
      p99_ms: round(smtp.p99Ms, 2),
      api_peak_rss_mb: rss,
      median_batch: medianBatch,
      ceiling: 'accept: the same message as POST /v1/emails, same API process',
      ceiling_per_s: round(acceptRate),
      ratio: ratio(rate, acceptRate),
      rounds: rounds.map((r) => {
        const relayRate = MESSAGES / r.smtp.seconds;
        const acceptRound = r.accepted.requests / r.accepted.seconds;
        return { relay_per_s: round(relayRate), accept_per_s: round(acceptRound), ratio: ratio(relayRate, acceptRound) };
      }),
      accept_p99_ms: round(Math.max(...rounds.map((r) => r.accepted.p99Ms)), 2),
      nodemailer: { rate_per_s: round(MESSAGES / viaNodemailer.seconds), ratio: ratio(MESSAGES / viaNodemailer.seconds, acceptRate), p99_ms: round(viaNodemailer.p99Ms, 2), cpu_s: viaNodemailer.cpu },
      postfix_ceiling: postfix ? 'postfix smtp-sink (no TLS: it has none)' : 'postfix smtp-sink (not installed: apt-get install postfix)',
      postfix_ceiling_per_s: postfix ? round(postfix) : null,
      postfix_ratio: ratio(rate, postfix ?? null),
      both_at_once: { smtp_per_s: both.smtpPerS, http_per_s: both.httpPerS },
      cpu_s: cpu,
      load: `${CONNECTIONS} STARTTLS connections with AUTH PLAIN, each message's MAIL, RCPT and DATA pipelined (nodemailer: one command per round trip), ${MESSAGES} messages of ${raw.length + 50} bytes after ${WARMUP}; accept: wrk, ${ACCEPT_CONNECTIONS} connections, ${ACCEPT_SECONDS} s; ${ROUNDS} rounds of each in turn, rates pooled`,
      messages: MESSAGES,
      concurrency: CONNECTIONS,
    };
  } finally {
    await sql.end();
    await rm(dir, { recursive: true, force: true });
  }
}
