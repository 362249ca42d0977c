import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { Config } from '../../src/platform/config.ts';
import type { Sql, TxSql } from '../../src/platform/db.ts';
import { newId } from '../../src/platform/ids.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { recordEvent, type EventType } from '../../src/events/record.ts';
import type { Resolver, ResolvedAddress } from '../../src/webhooks/destination.ts';
import type { WebhookTransportOverrides } from '../../src/webhooks/transport.ts';

/**
 * The worker with test-only webhook transport overrides (a trusted self-signed CA, a fake
 * resolver), run in-process against the test database and stopped before it is dropped.
 */
export function webhookWorker() {
  return {
    start: (config: Config, sql: Sql, webhooks: WebhookTransportOverrides) => startTestWorker(config, sql, { webhooks }),
  };
}

/** A resolver answering from a table the test edits as it goes; unknown names do not resolve. */
export function fakeDns(initial: Record<string, string[]> = {}) {
  const table = new Map(Object.entries(initial));
  const resolve: Resolver = async (hostname) => {
    const answers = table.get(hostname.toLowerCase());
    if (!answers) throw Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return answers.map((address): ResolvedAddress => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { table, resolve, set: (name: string, ...addresses: string[]) => table.set(name, addresses) };
}

/** Records an email and one event for it the way the event pipeline does; returns the event id. */
export async function emitEvent(sql: Sql, projectId: string, type: EventType = 'email.bounced', data: Record<string, unknown> = {
  to: ['someone@example.com'], bounce_type: 'permanent', bounce_subtype: 'General', diagnostic: 'smtp; 550 5.1.1 user unknown',
}, alsoInTransaction?: (tx: TxSql) => Promise<unknown>) {
  return sql.begin(async (tx: TxSql) => {
    const emailId = newId('email');
    await tx`
      insert into emails (id, project_id, from_address, to_addresses, subject, text)
      values (${emailId}, ${projectId}, 'sender@example.com', ${['someone@example.com']}, 'hello', 'hi')`;
    const eventId = await recordEvent(tx, { projectId, emailId, type, data });
    await alsoInTransaction?.(tx);
    return { eventId: eventId!, emailId };
  });
}

export type DeliveryState = {
  id: string;
  status: string;
  attemptCount: number;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  responseStatus: number | null;
  responseBody: string | null;
  error: string | null;
};

export async function deliveriesFor(sql: Sql, endpointId: string) {
  return sql<DeliveryState[]>`
    select id, status, attempt_count, last_attempt_at, next_attempt_at, response_status, response_body, error
    from webhook_deliveries where endpoint_id = ${endpointId} order by id`;
}

export async function endpointState(sql: Sql, endpointId: string) {
  const [row] = await sql<[{ status: string; consecutiveFailures: number; url: string }]>`
    select status, consecutive_failures, url from webhook_endpoints where id = ${endpointId}`;
  return row;
}

/**
 * What a receiver does: recompute `v1=` HMAC-SHA256 over `"<ts>." + raw body` with
 * the secret, compare in constant time, and refuse a timestamp more than 300 s away.
 */
export function receiverVerifies(secret: string, headers: IncomingHttpHeaders, rawBody: Buffer, nowSeconds = Date.now() / 1000): boolean {
  const signature = String(headers['x-webhook-signature'] ?? '');
  const timestamp = String(headers['x-webhook-timestamp'] ?? '');
  if (!/^\d+$/.test(timestamp) || Math.abs(nowSeconds - Number(timestamp)) > 300) return false;
  const expected = `v1=${createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex')}`;
  const a = Buffer.from(signature);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * A pending delivery of a new event that no job will attempt, for tests that run a task or a
 * flush themselves: the event is written directly, not through recordEvent, so nothing is queued.
 * With `attemptCount` above 0 it is due for a retry, which is `webhook__deliver`'s to make.
 */
export async function unqueuedDelivery(sql: Sql, projectId: string, endpointId: string, id = newId('delivery'), attemptCount = 0) {
  const emailId = newId('email');
  const eventId = newId('event');
  await sql.begin(async (tx: TxSql) => {
    await tx`
      insert into emails (id, project_id, from_address, to_addresses, subject, text)
      values (${emailId}, ${projectId}, 'sender@example.com', ${['someone@example.com']}, 'hello', 'hi')`;
    await tx`
      insert into events (id, project_id, email_id, type, data)
      values (${eventId}, ${projectId}, ${emailId}, 'email.delivered', ${tx.json({ to: ['someone@example.com'], smtp_response: '250 ok' })})`;
    await tx`
      insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, attempt_count)
      values (${id}, ${projectId}, ${endpointId}, ${eventId}, ${emailId}, ${attemptCount})`;
  });
  return { id, eventId };
}

/** `count` emails with one event each, recorded in one transaction the way the send task records them. */
export async function emitEvents(sql: Sql, projectId: string, count: number) {
  await sql.begin(async (tx: TxSql) => {
    for (let i = 0; i < count; i++) {
      const emailId = newId('email');
      await tx`
        insert into emails (id, project_id, from_address, to_addresses, subject, text)
        values (${emailId}, ${projectId}, 'sender@example.com', ${['someone@example.com']}, 'hello', 'hi')`;
      await recordEvent(tx, { projectId, emailId, type: 'email.delivered', data: { to: ['someone@example.com'], smtp_response: '250 ok' } });
    }
  });
}
