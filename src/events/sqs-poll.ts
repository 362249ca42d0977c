import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, SQSClient, type Message } from '@aws-sdk/client-sqs';
import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import { CONNECTIONS_CHANNEL, listQueueConnections, type ProviderConnection } from '../providers/connections.ts';
import { ingestSesRecord } from './ingest.ts';
import { unwrapSesRecord } from './normalise.ts';
import { prepareReceived, type PreparedReceived, type ReceivedSource } from '../inbound/ingest.ts';
import { storeReceived, storeReceivedIn } from '../inbound/store.ts';
import { GroupCommit } from '../platform/group-commit.ts';
import { s3ObjectStore } from '../providers/s3.ts';
import { AWS_DEADLINES, awsRequestHandler, type AwsDeadlines } from '../providers/aws-http.ts';

/** A received message that failed to fetch, parse or store this many times is stored from its notification (§22.4). */
const POISON_RECEIVES = 5;
const receives = (m: Message) => Number(m.Attributes?.ApproximateReceiveCount ?? 0);

const isReceived = (record: unknown) => (record as { notificationType?: unknown } | null)?.notificationType === 'Received';

export type SqsPollOptions = {
  /** ReceiveMessage long-poll wait, 0 to 20 s. */
  waitTimeSeconds?: number;
  /** How often the list of connected queues is re-read, so new connections start polling. */
  refreshMs?: number;
  /** Backoff after a failed receive or commit: base × 2^(n-1), capped, ±20 %. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /**
   * Received messages fetched at once per queue, parsed within the MIME pool's threads. Each may be
   * up to INBOUND_MAX_MESSAGE_BYTES, so a batch's ten are never parsed together. More than the
   * pool's threads, so an S3 fetch overlaps the parse before it.
   */
  receivedConcurrency?: number;
  /** S3's deadlines, for tests that cannot wait the real ones out. */
  s3Deadlines?: AwsDeadlines;
};

/** Received messages held by a poller beyond those being handled; past it, no more are received until one is done. */
const RECEIVED_HELD = 10;

type Deps = { config: Config; sql: Sql; log: Logger };
type Poller = { version: string; stop(): Promise<void> };

/** Queues live in their own region, which need not be the SES region of the connection. */
function queueRegion(queueUrl: string, fallback: string): string {
  try {
    const host = new URL(queueUrl).hostname;
    return host.match(/^sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/)?.[1] ?? host.match(/^([a-z0-9-]+)\.queue\.amazonaws\.com$/)?.[1] ?? fallback;
  } catch {
    return fallback;
  }
}

function sdkLogger(log: Logger) {
  return {
    debug: () => {},
    info: () => {},
    warn: (...args: unknown[]) => log.warn({ sdk: args.map(String).join(' ') }, 'AWS SDK warning'),
    error: (...args: unknown[]) => log.error({ sdk: args.map(String).join(' ') }, 'AWS SDK error'),
  };
}

/**
 * A cross-account SNS subscription sends its confirmation into the queue. Visiting the URL is
 * the queue owner's decision, so it is logged for them rather than followed.
 */
function warnIfSubscriptionConfirmation(body: string, log: Logger) {
  try {
    const envelope = JSON.parse(body) as { Type?: unknown; TopicArn?: unknown; SubscribeURL?: unknown };
    if (envelope.Type !== 'SubscriptionConfirmation') return;
    log.warn({ topicArn: envelope.TopicArn, subscribeUrl: envelope.SubscribeURL }, 'SNS asks to confirm the subscription of this queue; open SubscribeURL to confirm it');
  } catch {
    // not JSON: handled as an invalid record
  }
}

/**
 * Commits each sending event in its own transaction, in order, then deletes the committed ones in
 * one batch. A message whose commit failed stays in the queue and comes back after its visibility
 * timeout; one that is not an SES event at all is deleted, since it can never succeed.
 * Returns whether every message was committed.
 */
async function handleEvents(deps: Deps, client: SQSClient, conn: ProviderConnection, batch: { m: Message; record: unknown }[], log: Logger) {
  const committed: { Id: string; ReceiptHandle: string }[] = [];
  let allCommitted = true;
  for (const [i, { m, record }] of batch.entries()) {
    try {
      const outcome = await deps.sql.begin((tx) => ingestSesRecord(tx, log, conn.projectId, record));
      log.debug({ sqsMessageId: m.MessageId, outcome }, 'queued event handled');
      if (m.ReceiptHandle) committed.push({ Id: String(i), ReceiptHandle: m.ReceiptHandle });
    } catch (err) {
      allCommitted = false;
      log.warn({ err: (err as Error).message, sqsMessageId: m.MessageId }, 'event not committed; the message stays queued');
    }
  }
  if (committed.length) {
    // Not abortable: a shutdown must not leave committed events behind to be redelivered.
    const res = await client.send(new DeleteMessageBatchCommand({ QueueUrl: conn.eventsQueueUrl!, Entries: committed }));
    if (res.Failed?.length) log.warn({ failed: res.Failed.length }, 'some handled messages were not deleted; their repeats will be deduplicated');
  }
  return allCommitted;
}

/**
 * One `Received` message: its projects found among the connection's SES account's, the message
 * fetched and parsed, then stored. Its lane slot is released once it is parsed, so the next one
 * is fetched while it waits for the commit it shares with the others parsed meanwhile. Answers
 * whether it was handled, so it may be deleted from the queue. A failure (S3 past its deadline,
 * say) leaves the message to come back after its visibility timeout; it costs this message only.
 */
async function handleReceived(
  deps: Deps, source: ReceivedSource, stores: GroupCommit<PreparedReceived, number>, m: Message, record: unknown, log: Logger, parsed: () => void,
): Promise<boolean> {
  try {
    const prepared = await prepareReceived({ ...deps, log }, source, record);
    parsed();
    const outcome = typeof prepared === 'string' ? prepared : (await stores.run(prepared)) ? 'stored' : 'duplicate';
    log.debug({ sqsMessageId: m.MessageId, outcome }, 'queued event handled');
    return true;
  } catch (err) {
    parsed();
    if (receives(m) < POISON_RECEIVES) {
      log.warn({ err: (err as Error).message, sqsMessageId: m.MessageId }, 'received message not stored; the message stays queued');
      return false;
    }
    // Its last failure logged, the message is stored from its notification with parse_failed.
    log.warn({ err: (err as Error).message, sqsMessageId: m.MessageId, receives: receives(m) }, 'received message failed too often; storing it from its notification');
    try {
      const p = await prepareReceived({ ...deps, log }, source, record, { parseFailed: true });
      if (typeof p !== 'string') await storeReceived(deps.sql, p.targets, p.incoming);
      return true;
    } catch (again) {
      log.warn({ err: (again as Error).message, sqsMessageId: m.MessageId }, 'received message not stored from its notification either; the message stays queued');
      return false;
    }
  }
}

function startPoller(deps: Deps, conn: ProviderConnection, version: string, opts: Required<SqsPollOptions>): Poller {
  const log = deps.log.child({ projectId: conn.projectId, queueUrl: conn.eventsQueueUrl });
  const abort = new AbortController();
  const client = new SQSClient({
    region: queueRegion(conn.eventsQueueUrl!, conn.region),
    credentials: { accessKeyId: conn.accessKeyId, secretAccessKey: conn.secretAccessKey },
    ...(deps.config.awsEndpointSqs ? { endpoint: deps.config.awsEndpointSqs } : {}),
    maxAttempts: 1, // our own backoff below, which a shutdown can interrupt
    requestHandler: awsRequestHandler(AWS_DEADLINES.sqs),
    logger: sdkLogger(log),
  });
  const backoff = (failures: number) =>
    Math.min(opts.backoffMaxMs, opts.backoffBaseMs * 2 ** (failures - 1)) * (0.8 + Math.random() * 0.4);

  // The queue speaks for its connection's SES account only (§22.2), and its S3 reads end with the
  // poller, so a shutdown never waits on a stalled object.
  const s3 = s3ObjectStore(deps.config, conn, opts.s3Deadlines);
  const source: ReceivedSource = {
    sesAccountIds: [conn.sesAccountId],
    store: () => ({ open: (bucket, key) => s3.open(bucket, key, abort.signal) }),
  };

  // Received messages wait on S3 and a parse: they take a lane of their own, a few at a time,
  // so the sending events behind them are received and recorded meanwhile (§22.3).
  const waiting: { m: Message; record: unknown }[] = [];
  /** Messages being fetched and parsed: at most `receivedConcurrency`. */
  let parsing = 0;
  /** Every received message's task until it is stored (or failed). */
  const running = new Set<Promise<void>>();
  // Those parsed meanwhile share a transaction, so a batch costs about one commit, not ten.
  const stores = new GroupCommit<PreparedReceived, number>(
    (items) => deps.sql.begin(async (tx) => (await storeReceivedIn(tx, items)).map((ids) => ids.length)),
    { maxBatch: 10, maxInFlight: 1 },
    async (p) => (await storeReceived(deps.sql, p.targets, p.incoming)).length,
  );
  // A message held here past its visibility timeout is received again with a new receipt
  // handle, which alone can delete it: the held copy takes the new handle instead of a second
  // copy being queued.
  const held = new Map<string, Message>();
  const hold = (m: Message, record: unknown) => {
    const known = m.MessageId ? held.get(m.MessageId) : undefined;
    if (known) { known.ReceiptHandle = m.ReceiptHandle; return; }
    if (m.MessageId) held.set(m.MessageId, m);
    waiting.push({ m, record });
  };
  // Handled ones are deleted in batches of up to ten, off the lane's slots, each with the
  // latest receipt handle it was received with.
  const handled: Message[] = [];
  let deleting: Promise<void> | undefined;
  const deleteHandled = () => {
    deleting ??= (async () => {
      while (handled.length) {
        const batch = handled.splice(0, 10);
        try {
          const res = await client.send(new DeleteMessageBatchCommand({
            QueueUrl: conn.eventsQueueUrl!, Entries: batch.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
          }));
          if (res.Failed?.length) log.warn({ failed: res.Failed.length }, 'some handled messages were not deleted; their repeats will be deduplicated');
        } catch (err) {
          log.warn({ err: (err as Error).message, count: batch.length }, 'handled messages were not deleted; their repeats will be deduplicated');
        }
      }
    })().finally(() => {
      deleting = undefined;
      if (handled.length) deleteHandled();
    });
  };
  const pump = () => {
    while (!abort.signal.aborted && parsing < opts.receivedConcurrency && waiting.length) {
      const { m, record } = waiting.shift()!;
      parsing++;
      let released = false;
      const release = () => { if (!released) { released = true; parsing--; pump(); } };
      const task: Promise<void> = handleReceived(deps, source, stores, m, record, log, release)
        .then((ok) => { if (ok && m.ReceiptHandle) { handled.push(m); deleteHandled(); } })
        .finally(() => { release(); running.delete(task); if (m.MessageId) held.delete(m.MessageId); });
      running.add(task);
    }
  };
  const aborted = new Promise<void>((resolve) => abort.signal.addEventListener('abort', () => resolve(), { once: true }));

  const loop = (async () => {
    let failures = 0;
    while (!abort.signal.aborted) {
      // Held received messages (waiting, parsing, or parsed and waiting for their commit) are
      // bounded; the lane's deadlines bound the wait for room.
      while (waiting.length + running.size >= opts.receivedConcurrency + RECEIVED_HELD && !abort.signal.aborted) {
        await Promise.race([...running, aborted]);
      }
      if (abort.signal.aborted) break;
      try {
        const res = await client.send(
          new ReceiveMessageCommand({ QueueUrl: conn.eventsQueueUrl!, MaxNumberOfMessages: 10, WaitTimeSeconds: opts.waitTimeSeconds, MessageSystemAttributeNames: ['ApproximateReceiveCount'] }),
          // SQS holds a long poll open for its wait before it answers.
          { abortSignal: abort.signal, requestTimeout: opts.waitTimeSeconds * 1000 + AWS_DEADLINES.sqs.headersMs },
        );
        const events: { m: Message; record: unknown }[] = [];
        for (const m of res.Messages ?? []) {
          const body = m.Body ?? '';
          if (body.includes('"SubscriptionConfirmation"')) warnIfSubscriptionConfirmation(body, log);
          const record = unwrapSesRecord(body);
          if (isReceived(record)) hold(m, record);
          else events.push({ m, record });
        }
        pump();
        const ok = await handleEvents(deps, client, conn, events, log);
        failures = ok ? 0 : failures + 1;
      } catch (err) {
        if (abort.signal.aborted) break;
        failures++;
        log.warn({ err: (err as Error).message, failures }, 'event queue poll failed; backing off');
      }
      if (failures) await sleep(backoff(failures), undefined, { signal: abort.signal }).catch(() => {});
    }
    // Those not started stay in the queue and come back; those started end with their S3 reads.
    waiting.length = 0;
    held.clear();
    await Promise.allSettled([...running]);
    // Not abortable: a shutdown must not leave stored messages behind to be received again.
    while (deleting) await deleting;
  })();

  return {
    version,
    async stop() {
      abort.abort();
      await loop;
      client.destroy();
    },
  };
}

/**
 * Long-polls the events queue of every connected project from the worker. Several replicas may
 * poll one queue: SQS hides a received message for its visibility timeout, and the event's
 * dedupe key makes a repeat a no-op. Errors back off and never escape; `close` aborts the poll.
 */
export async function startSqsPolling(deps: Deps, options: SqsPollOptions = {}) {
  const opts: Required<SqsPollOptions> = {
    waitTimeSeconds: 20,
    refreshMs: 30_000,
    backoffBaseMs: 1_000,
    backoffMaxMs: 60_000,
    receivedConcurrency: 4,
    s3Deadlines: AWS_DEADLINES.s3,
    ...options,
  };
  const pollers = new Map<string, Poller>();
  let closed = false;

  const refresh = async () => {
    const connections = await listQueueConnections(deps.sql, deps.config, deps.log);
    if (closed) return;
    const wanted = new Set<string>();
    for (const conn of connections) {
      wanted.add(conn.projectId);
      const version = [conn.eventsQueueUrl, conn.region, conn.accessKeyId, conn.updatedAt.getTime()].join('|');
      const current = pollers.get(conn.projectId);
      if (current?.version === version) continue;
      await current?.stop();
      pollers.set(conn.projectId, startPoller(deps, conn, version, opts));
      deps.log.info({ projectId: conn.projectId }, current ? 'events queue connection changed; polling again' : 'polling events queue');
    }
    for (const [projectId, poller] of pollers) {
      if (wanted.has(projectId)) continue;
      pollers.delete(projectId);
      await poller.stop();
    }
  };

  let refreshing = refresh().catch((err) => deps.log.error({ err: (err as Error).message }, 'could not list event queues'));
  await refreshing;
  const refreshSoon = () => {
    if (closed) return;
    refreshing = refreshing
      .then(refresh)
      .catch((err) => deps.log.error({ err: (err as Error).message }, 'could not list event queues'));
  };
  // A connect or disconnect anywhere is announced, so polling follows at once; the timer is the
  // fallback for a notification missed while the listening connection was down.
  const listening = await deps.sql.listen(CONNECTIONS_CHANNEL, refreshSoon, refreshSoon)
    .catch((err) => { deps.log.warn({ err: (err as Error).message }, 'cannot listen for connection changes; refreshing on a timer only'); return undefined; });
  const timer = setInterval(refreshSoon, opts.refreshMs);

  return {
    async close() {
      closed = true;
      clearInterval(timer);
      await listening?.unlisten().catch(() => {});
      await refreshing;
      await Promise.all([...pollers.values()].map((p) => p.stop()));
      pollers.clear();
    },
  };
}
