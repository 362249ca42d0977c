import { timingSafeEqual } from 'node:crypto';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Sql } from './db.ts';

/**
 * One Prometheus registry per process. Every outcome is counted at the one place it is decided;
 * these functions are the only way in, so label sets stay fixed and cardinality bounded.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry });

const httpRequests = new Counter({
  name: 'mailroom_http_requests_total',
  help: 'HTTP requests answered, by method, route pattern and status.',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [registry],
});
const httpDuration = new Histogram({
  name: 'mailroom_http_request_duration_seconds',
  help: 'Time to answer an HTTP request, by method and route pattern.',
  labelNames: ['method', 'route'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});
const emails = new Counter({
  name: 'mailroom_emails_total',
  help: 'Send attempts by provider (ses, sink) and outcome (sent, failed, throttled, retried).',
  labelNames: ['provider', 'outcome'] as const,
  registers: [registry],
});
const sendDuration = new Histogram({
  name: 'mailroom_send_duration_seconds',
  help: 'Time the provider took to accept or refuse a message.',
  labelNames: ['provider'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});
const webhookDeliveries = new Counter({
  name: 'mailroom_webhook_deliveries_total',
  help: 'Webhook delivery attempts by outcome (delivered, retried, failed).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
const eventsIngested = new Counter({
  name: 'mailroom_events_ingested_total',
  help: 'Provider notifications recorded as events, by event type.',
  labelNames: ['type'] as const,
  registers: [registry],
});
const trackingEvents = new Counter({
  name: 'mailroom_tracking_events_total',
  help: 'Opens and clicks recorded (Mailroom\'s own tracking and SES\'s), by event type.',
  labelNames: ['type'] as const,
  registers: [registry],
});
const trackingHitsUnrecorded = new Counter({
  name: 'mailroom_tracking_hits_unrecorded_total',
  help: 'Opens and clicks answered but not recorded: past the 100 of their type an email records, or of an email no longer there.',
  registers: [registry],
});
const sinkMessages = new Counter({
  name: 'mailroom_sink_messages_total',
  help: 'Messages caught and stored by the SMTP sink.',
  registers: [registry],
});

const smtpSubmissions = new Counter({
  name: 'mailroom_smtp_submissions_total',
  help: 'Messages submitted to the SMTP relay, by outcome (accepted, rejected, auth_failed).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
for (const outcome of ['accepted', 'rejected', 'auth_failed']) smtpSubmissions.labels(outcome);

const inboundParseFailed = new Counter({
  name: 'mailroom_inbound_parse_failed_total',
  help: 'Received messages stored from their notification with parse_failed, by reason: over a parse budget or unreadable (refused), or failing to parse or store five times (poison).',
  labelNames: ['reason'] as const,
  registers: [registry],
});
for (const reason of ['refused', 'poison']) inboundParseFailed.labels(reason);

export type Provider = 'ses' | 'sink';
export type EmailOutcome = 'sent' | 'failed' | 'throttled' | 'retried';

/**
 * Bumped by every recording below, so a rendering is reused only while nothing it shows has
 * moved: a scrape after any request or send sees it. Scrapes of /metrics itself do not bump it,
 * or fifty scrapes at once could never share one rendering.
 */
let recorded = 0;

export function recordHttp(method: string, route: string, status: number, seconds: number) {
  httpRequests.inc({ method, route, status: String(status) });
  httpDuration.observe({ method, route }, seconds);
  if (route !== '/metrics') recorded++;
}
export function recordEmailOutcome(provider: Provider, outcome: EmailOutcome) {
  emails.inc({ provider, outcome });
  recorded++;
}
export function observeSend(provider: Provider, seconds: number) {
  sendDuration.observe({ provider }, seconds);
  recorded++;
}
export function recordWebhookOutcome(outcome: 'delivered' | 'retried' | 'failed') {
  webhookDeliveries.inc({ outcome });
  recorded++;
}
export function recordEventIngested(type: string) {
  eventsIngested.inc({ type });
  recorded++;
}
export function recordTrackingEvent(type: 'email.opened' | 'email.clicked', count = 1) {
  trackingEvents.inc({ type }, count);
}
export function recordTrackingHitsUnrecorded(count: number) {
  trackingHitsUnrecorded.inc(count);
}
export function recordSinkMessage() {
  sinkMessages.inc();
  recorded++;
}
export function recordInboundParseFailed(reason: 'refused' | 'poison') {
  inboundParseFailed.inc({ reason });
  recorded++;
}
export function recordSmtpSubmission(outcome: 'accepted' | 'rejected' | 'auth_failed') {
  smtpSubmissions.inc({ outcome });
  recorded++;
}

const QUEUE_READ_TIMEOUT_MS = 1000;
/** The queue gauges are read at most this often; every scrape in between shares the reading. */
const QUEUE_READ_EVERY_MS = 5000;
type QueueRow = { task: string; state: string; jobs: number };
let queueSql: Sql | undefined;
/** The latest reading, or the one under way: undefined rows when the read failed or timed out. */
let queueReading: { startedAt: number; rows: Promise<Reading | undefined> } | undefined;

type RetentionRow = { oldestDayAgeSeconds: number | null; daysAhead: number | null };
type Reading = { queue: QueueRow[]; retention: RetentionRow | null };

/**
 * One read of the queue by task and state, and of where retention stands (ops.retention), in one
 * statement: one round trip, given up (and cancelled) after 1 s.
 */
async function readQueueOnce(sql: Sql): Promise<Reading | undefined> {
  const query = sql<[Reading]>`
    select coalesce((select json_agg(q) from (
             select task_identifier as task,
                    case when locked_at is not null then 'running'
                         when attempts >= max_attempts then 'dead'
                         when run_at > now() then 'scheduled'
                         else 'ready' end as state,
                    count(*)::int as jobs
             from graphile_worker.jobs group by 1, 2) q), '[]') as queue,
           (select json_build_object('oldestDayAgeSeconds', oldest_day_age_seconds, 'daysAhead', days_ahead)
            from ops.retention) as retention`;
  let timer: NodeJS.Timeout | undefined;
  try {
    const [row] = await Promise.race([
      query,
      new Promise<never>((_, reject) => { timer = setTimeout(() => { query.cancel(); reject(new Error('timeout')); }, QUEUE_READ_TIMEOUT_MS); }),
    ]);
    return row;
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The queue's reading for this scrape: a new one at most every 5 s, otherwise the one already
 * taken or under way. Fifty scrapes at once cost one query, and none waits more than the 1 s a
 * read may take.
 */
function queueRows(sql: Sql): Promise<Reading | undefined> {
  const now = performance.now();
  if (!queueReading || now - queueReading.startedAt >= QUEUE_READ_EVERY_MS) {
    queueReading = { startedAt: now, rows: readQueueOnce(sql) };
  }
  return queueReading.rows;
}

/** §18.6: how far back the oldest day partition reaches, and how many days ahead are made. */
new Gauge({
  name: 'mailroom_retention_oldest_day_age_seconds',
  help: 'Age of the oldest day partition of emails (from the start of its UTC day), by the database clock (ops.retention).',
  registers: [registry],
  async collect() {
    const row = queueSql && (await queueRows(queueSql))?.retention;
    if (row?.oldestDayAgeSeconds != null) this.set(row.oldestDayAgeSeconds);
  },
});
new Gauge({
  name: 'mailroom_partitions_days_ahead',
  help: 'Days after today (UTC, the database clock) whose partitions are made; accepts need today\'s (ops.retention).',
  registers: [registry],
  async collect() {
    const row = queueSql && (await queueRows(queueSql))?.retention;
    if (row?.daysAhead != null) this.set(row.daysAhead);
  },
});

/**
 * `mailroom_queue_jobs{task,state}`, read from graphile-worker's jobs with one query shared by
 * every scrape within 5 s. A slow database leaves the gauge at its last values rather than
 * holding the scrape past 1 s.
 */
new Gauge({
  name: 'mailroom_queue_jobs',
  help: 'Jobs in the queue by task and state (ready, scheduled, running, dead), read at most every 5 s.',
  labelNames: ['task', 'state'] as const,
  registers: [registry],
  async collect() {
    if (!queueSql) return;
    const rows = (await queueRows(queueSql))?.queue;
    // Keep the last reading when this one failed; the scrape itself still answers.
    if (!rows) return;
    this.reset();
    for (const row of rows) this.set({ task: row.task, state: row.state }, row.jobs);
  },
});

/** The pool the database-read gauges read through (the queue's, the reputation's), once set. */
export function metricsSql(): Sql | undefined {
  return queueSql;
}

/** The pool the queue gauge reads through; set once by the process. */
export function readQueueFrom(sql: Sql) {
  if (queueSql !== sql) queueReading = undefined;
  queueSql = sql;
}

/** Whether a scrape may read: always without METRICS_TOKEN, else only with it as bearer token. */
export function scrapeAllowed(token: string | undefined, authorization: string | undefined): boolean {
  if (!token) return true;
  const given = Buffer.from(/^Bearer (.+)$/i.exec(authorization ?? '')?.[1] ?? '');
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export const METRICS_CONTENT_TYPE = registry.contentType;

/** A rendering is shared by scrapes within this long of it, while nothing recorded has moved. */
const RENDER_REUSE_MS = 1000;
let rendering: { startedAt: number; recorded: number; text: Promise<string> } | undefined;

/**
 * The exposition text for a scrape. Rendering runs every collector (the process's heap, GC and
 * event-loop figures among them) at several milliseconds of CPU each time; fifty scrapes at once
 * share one rendering, so they cost the API's event loop one instead of fifty. Any recording in
 * between (a request answered, a send) makes the next scrape render afresh; only the process's
 * own figures (CPU, memory) may be up to a second old.
 */
export function renderMetrics(): Promise<string> {
  const now = performance.now();
  if (!rendering || now - rendering.startedAt >= RENDER_REUSE_MS || rendering.recorded !== recorded) {
    const text = registry.metrics();
    rendering = { startedAt: now, recorded, text };
    // A failed rendering is not reused.
    text.catch(() => { if (rendering?.text === text) rendering = undefined; });
  }
  return rendering.text;
}

/**
 * The worker's own `/metrics` listener on METRICS_PORT (a worker serves no other HTTP). Resolves
 * with the bound port and a close function.
 */
export async function startMetricsServer(opts: { host: string; port: number; token: string | undefined; sql: Sql }) {
  const { createServer } = await import('node:http');
  readQueueFrom(opts.sql);
  const server = createServer(async (req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    if (!scrapeAllowed(opts.token, req.headers.authorization)) {
      res.writeHead(401, { 'content-type': 'text/plain' }).end('a valid METRICS_TOKEN bearer token is required\n');
      return;
    }
    res.writeHead(200, { 'content-type': METRICS_CONTENT_TYPE }).end(await renderMetrics());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => { server.off('error', reject); resolve(); });
  });
  const port = (server.address() as { port: number }).port;
  return { port, close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}
