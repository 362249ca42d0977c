import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, SQSClient, type Message } from '@aws-sdk/client-sqs';
import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import { CONNECTIONS_CHANNEL, listQueueConnections, type ProviderConnection } from '../providers/connections.ts';
import { ingestSesRecord } from './ingest.ts';
import { unwrapSesRecord } from './normalise.ts';
import { prepareReceived } from '../inbound/ingest.ts';
import { storeReceived, storeReceivedIn } from '../inbound/store.ts';
import { s3ObjectStore } from '../providers/s3.ts';

const isReceived = (record: unknown) => (record as { notificationType?: unknown } | null)?.notificationType === 'Received';

/** A received message that failed to parse or store this many times is stored from its notification (§22.4). */
const POISON_RECEIVES = 5;
const receives = (m: Message) => Number(m.Attributes?.ApproximateReceiveCount ?? 0);

export type SqsPollOptions = {
  /** ReceiveMessage long-poll wait, 0 to 20 s. */
  waitTimeSeconds?: number;
  /** How often the list of connected queues is re-read, so new connections start polling. */
  refreshMs?: number;
  /** Backoff after a failed receive or commit: base × 2^(n-1), capped, ±20 %. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
};

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
 * Commits each message's event in its own transaction, then deletes the committed ones in one
 * batch. A message whose commit failed stays in the queue and comes back after its visibility
 * timeout; one that is not an SES event at all is deleted, since it can never succeed.
 * Returns whether every message was committed.
 */
async function handleBatch(deps: Deps, client: SQSClient, conn: ProviderConnection, messages: Message[], log: Logger) {
  const committed: { Id: string; ReceiptHandle: string }[] = [];
  let allCommitted = true;
  const done = (i: number, message: Message, outcome: string) => {
    log.debug({ sqsMessageId: message.MessageId, outcome }, 'queued event handled');
    if (message.ReceiptHandle) committed.push({ Id: String(i), ReceiptHandle: message.ReceiptHandle });
  };
  const failed = (message: Message, err: unknown) => {
    allCommitted = false;
    log.warn({ err: (err as Error).message, sqsMessageId: message.MessageId }, 'event not committed; the message stays queued');
  };
  const records = messages.map((message) => {
    const body = message.Body ?? '';
    if (body.includes('"SubscriptionConfirmation"')) warnIfSubscriptionConfirmation(body, log);
    return unwrapSesRecord(body);
  });

  const store = () => s3ObjectStore(deps.config, conn);
  // Its last failure logged, the message is stored from its notification with parse_failed, alone.
  const poisoned = async (i: number, m: Message, err: unknown) => {
    log.warn({ err: (err as Error).message, sqsMessageId: m.MessageId, receives: receives(m) }, 'received message failed too often; storing it from its notification');
    try {
      const p = await prepareReceived({ ...deps, log }, store, records[i], { parseFailed: true });
      if (typeof p !== 'string') await storeReceived(deps.sql, p.targets, p.incoming);
      done(i, m, typeof p === 'string' ? p : 'parse_failed');
    } catch (again) {
      failed(m, again);
    }
  };
  // Received messages are independent and mostly wait on S3: a batch's are fetched and parsed
  // together, then stored in one transaction, so the batch costs one commit (and one webhook
  // flush job update) rather than one each. Sending events keep their order, one by one.
  const receiving = (async () => {
    const prepared = await Promise.all(messages.map(async (m, i) => {
      if (!isReceived(records[i])) return undefined;
      try {
        const p = await prepareReceived({ ...deps, log }, store, records[i]);
        if (typeof p === 'string') { done(i, m, p); return undefined; }
        return { i, m, p };
      } catch (err) {
        if (receives(m) >= POISON_RECEIVES) await poisoned(i, m, err);
        else failed(m, err);
        return undefined;
      }
    }));
    const ready = prepared.filter((x) => x !== undefined);
    if (!ready.length) return;
    try {
      await deps.sql.begin(async (tx) => {
        for (const { p } of ready) await storeReceivedIn(tx, p.targets, p.incoming);
      });
      for (const { i, m } of ready) done(i, m, 'stored');
    } catch {
      // One message the database refuses must not hold the others back: each on its own.
      for (const { i, m, p } of ready) {
        try {
          await storeReceived(deps.sql, p.targets, p.incoming);
          done(i, m, 'stored');
        } catch (err) {
          if (receives(m) >= POISON_RECEIVES) await poisoned(i, m, err);
          else failed(m, err);
        }
      }
    }
  })();
  const sending = (async () => {
    for (const [i, m] of messages.entries()) {
      if (isReceived(records[i])) continue;
      try {
        done(i, m, await deps.sql.begin((tx) => ingestSesRecord(tx, log, conn.projectId, records[i])));
      } catch (err) {
        failed(m, err);
      }
    }
  })();
  await Promise.all([receiving, sending]);
  if (committed.length) {
    // Not abortable: a shutdown must not leave committed events behind to be redelivered.
    const res = await client.send(new DeleteMessageBatchCommand({ QueueUrl: conn.eventsQueueUrl!, Entries: committed }));
    if (res.Failed?.length) log.warn({ failed: res.Failed.length }, 'some handled messages were not deleted; their repeats will be deduplicated');
  }
  return allCommitted;
}

function startPoller(deps: Deps, conn: ProviderConnection, version: string, opts: Required<SqsPollOptions>): Poller {
  const log = deps.log.child({ projectId: conn.projectId, queueUrl: conn.eventsQueueUrl });
  const abort = new AbortController();
  const client = new SQSClient({
    region: queueRegion(conn.eventsQueueUrl!, conn.region),
    credentials: { accessKeyId: conn.accessKeyId, secretAccessKey: conn.secretAccessKey },
    ...(deps.config.awsEndpointSqs ? { endpoint: deps.config.awsEndpointSqs } : {}),
    maxAttempts: 1, // our own backoff below, which a shutdown can interrupt
    logger: sdkLogger(log),
  });
  const backoff = (failures: number) =>
    Math.min(opts.backoffMaxMs, opts.backoffBaseMs * 2 ** (failures - 1)) * (0.8 + Math.random() * 0.4);

  const loop = (async () => {
    let failures = 0;
    while (!abort.signal.aborted) {
      try {
        const res = await client.send(
          new ReceiveMessageCommand({ QueueUrl: conn.eventsQueueUrl!, MaxNumberOfMessages: 10, WaitTimeSeconds: opts.waitTimeSeconds, MessageSystemAttributeNames: ['ApproximateReceiveCount'] }),
          { abortSignal: abort.signal },
        );
        const ok = await handleBatch(deps, client, conn, res.Messages ?? [], log);
        failures = ok ? 0 : failures + 1;
      } catch (err) {
        if (abort.signal.aborted) break;
        failures++;
        log.warn({ err: (err as Error).message, failures }, 'event queue poll failed; backing off');
      }
      if (failures) await sleep(backoff(failures), undefined, { signal: abort.signal }).catch(() => {});
    }
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
