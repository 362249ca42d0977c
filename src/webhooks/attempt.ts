import type { Config } from '../platform/config.ts';
import { plannedEachTime, type Sql, type TxSql } from '../platform/db.ts';
import { commitShared } from '../platform/shared-commit.ts';
import { GroupCommit, groupCommitPerPool } from '../platform/group-commit.ts';
import type { Logger } from '../platform/log.ts';
import { recordWebhookOutcome } from '../platform/metrics.ts';
import { deliverJob } from './queries.ts';
import { openSecret } from './secret.ts';
import { signWebhook, standardWebhookHeaders } from './sign.ts';
import { AUTO_DISABLE_AFTER, decideOutcome, type Outcome } from './outcome.ts';
import { createWebhookTransport, USER_AGENT, type AttemptResult, type WebhookTransport, type WebhookTransportOverrides } from './transport.ts';

/** A delivery with its endpoint and event, as read when its attempt starts. */
export type Attempt = {
  id: string;
  projectId: string;
  endpointId: string;
  status: 'pending' | 'delivered' | 'failed';
  attemptCount: number;
  url: string;
  endpointStatus: string;
  secretEncrypted: Buffer;
  eventId: string;
  type: string;
  emailId: string;
  data: unknown;
  eventCreatedAt: Date;
};

export type AttemptKey = { projectId: string; deliveryId: string };

/**
 * Deliveries with their endpoint and event, read at attempt time so a URL edit reaches queued
 * deliveries. Each row is matched on its own project. `leased` marks one a flush holds.
 * Undefined for a key whose delivery is gone or is not its project's.
 *
 * Planned each time: the generic plan a prepared statement kept from small tables scanned every
 * delivery, each joined to every event of its project, and read ten times the pages.
 */
const LOAD_ATTEMPTS = `
  select d.id, d.project_id, d.endpoint_id, d.status, d.attempt_count, coalesce(d.leased_until > now(), false) as leased,
         w.url, w.status as endpoint_status, w.secret_encrypted,
         e.id as event_id, e.type, d.email_id, e.data, e.created_at as event_created_at
  from webhook_deliveries d
  join webhook_endpoints w on w.id = d.endpoint_id and w.project_id = d.project_id
  join events e on e.id = d.event_id and e.email_id = d.email_id and e.project_id = d.project_id
  where d.id = any($1::text[]) and d.project_id = any($2::text[])`;

type Loaded = Attempt & { leased: boolean };

export async function loadAttempts(sql: Sql, keys: AttemptKey[]) {
  const rows = await plannedEachTime<Loaded[]>(sql, LOAD_ATTEMPTS, [keys.map((k) => k.deliveryId), keys.map((k) => k.projectId)]);
  const byId = new Map(rows.map((r) => [r.id, r]));
  // Ids are unique across projects; the check keeps each delivery to the project its job names.
  return keys.map((k) => {
    const row = byId.get(k.deliveryId);
    return row?.projectId === k.projectId ? row : undefined;
  });
}

/** An attempt's answer and when it came. */
type Answered = { result: AttemptResult; at: Date };

/**
 * What follows a settled delivery, as the tail of the settling statement: reschedule (same job
 * key: graphile-worker hands the key from the running job to this later one), clear the
 * endpoint's failure count, or add to it (the tenth in a row disables it). Yields the endpoint's
 * status when it changed it.
 */
function followUp(sql: Sql | TxSql, a: Attempt, outcome: Outcome, attempted: boolean) {
  if (outcome.status === 'pending') {
    return sql`select ${deliverJob(sql, a.id, a.projectId, outcome.runAt)} from settled`;
  }
  if (outcome.status === 'delivered') {
    return sql`
      update webhook_endpoints w set consecutive_failures = 0, updated_at = now()
      from settled where w.id = settled.endpoint_id and w.project_id = ${a.projectId} and w.consecutive_failures <> 0
      returning w.status as endpoint_status`;
  }
  // An endpoint switched off is not failing: a delivery settled without an attempt does not count.
  if (!attempted) return sql`select 1 from settled`;
  return sql`
    update webhook_endpoints w set
      consecutive_failures = w.consecutive_failures + 1,
      status = case when w.status = 'active' and w.consecutive_failures + 1 >= ${AUTO_DISABLE_AFTER}
                    then 'disabled_after_failures' else w.status end,
      last_error = ${outcome.error}, last_error_at = now(),
      updated_at = now()
    from settled where w.id = settled.endpoint_id and w.project_id = ${a.projectId}
    returning w.status as endpoint_status`;
}

/**
 * The CTEs that go with a settled delivery before its follow-up: a final outcome adds to its
 * endpoint's hourly counters (ops.webhook_health), and a retry's error becomes the endpoint's last
 * error (a failure's is set by the follow-up's own update of the endpoint).
 */
function noteOutcome(sql: Sql | TxSql, a: Attempt, outcome: Outcome, attempted: boolean) {
  if (outcome.status === 'pending') {
    return attempted
      ? sql`, noted as (
          update webhook_endpoints w set last_error = ${outcome.error}, last_error_at = now()
          from settled where w.id = settled.endpoint_id and w.project_id = ${a.projectId} returning 1)`
      : sql``;
  }
  return sql`, counted as (${countSettled(sql, outcome.status)})`;
}

/**
 * Adds the deliveries a CTE named `settled` (`endpoint_id, project_id, last_attempt_at,
 * created_at`) settled to their endpoints' hourly counters, in the hour of the last attempt (or,
 * settled without one, of the delivery's making), as `stats rebuild` counts them. Sharded by
 * connection as countEvents does, so settles never wait on one another's counter row.
 */
function countSettled(sql: Sql | TxSql, metric: 'delivered' | 'failed') {
  return sql`
    insert into webhook_endpoint_counts as c (endpoint_id, project_id, hour, metric, shard, n)
    select endpoint_id, project_id, date_trunc('hour', coalesce(last_attempt_at, created_at)), ${metric}, pg_backend_pid(), count(*)
    from settled group by 1, 2, 3
    order by 1, 3
    on conflict (endpoint_id, hour, metric, shard) do update set n = c.n + excluded.n`;
}

/**
 * Records an attempt's outcome with its follow-up in one statement. The update is conditional on
 * the attempt count read before the POST: a second run that raced this one, or a rerun after a
 * lost commit answer, changes nothing.
 */
function settleStatement(sql: Sql | TxSql, a: Attempt, outcome: Outcome, answered: Answered | null) {
  // Settling without an attempt (endpoint switched off) keeps the last answer on record. The
  // attempt's time is when it was answered, on the clock the next attempt's time was set by,
  // not when a shared commit got round to it.
  const attempt = answered
    ? sql`, attempt_count = attempt_count + 1, last_attempt_at = ${answered.at},
        response_status = ${answered.result.responseStatus}, response_body = ${answered.result.responseBody}`
    : sql``;
  return sql<{ endpointStatus?: string }[]>`
    with settled as (
      update webhook_deliveries set
        status = ${outcome.status},
        next_attempt_at = ${outcome.status === 'pending' ? outcome.runAt : null},
        error = ${outcome.error},
        leased_until = null
        ${attempt}
      where id = ${a.id} and email_id = ${a.emailId} and project_id = ${a.projectId} and status = 'pending' and attempt_count = ${a.attemptCount}
      returning endpoint_id, project_id, last_attempt_at, created_at)
    ${noteOutcome(sql, a, outcome, answered !== null)}
    ${followUp(sql, a, outcome, answered !== null)}`;
}

type Delivered = { a: Attempt; answered: Answered };

/**
 * Deliveries answered 2xx at about the same moment, settled in one statement with the reset of
 * their endpoints' failure counts: the common outcome, where a statement per delivery cost
 * PostgreSQL more than the rows it changed. Each update is conditional as in settleStatement.
 * The id list lets the update find its rows by primary key whatever the planner knows of the table.
 */
async function settleDelivered(sql: Sql, items: Delivered[]): Promise<(string | undefined)[]> {
  const answers = items.map(({ a, answered }) => ({
    id: a.id, email_id: a.emailId, project_id: a.projectId, attempt_count: a.attemptCount, answered_at: answered.at.toISOString(),
    response_status: answered.result.responseStatus, response_body: answered.result.responseBody,
  }));
  const rows = await sql<{ id: string; endpointStatus: string | null }[]>`
    with answered as (
      select * from jsonb_to_recordset(${sql.json(answers as never)})
        as a(id text, email_id text, project_id text, attempt_count int, answered_at timestamptz, response_status int, response_body text)),
    settled as (
      update webhook_deliveries d set
        status = 'delivered', next_attempt_at = null, error = null, leased_until = null,
        attempt_count = d.attempt_count + 1, last_attempt_at = a.answered_at,
        response_status = a.response_status, response_body = a.response_body
      from answered a
      where d.id = any(${answers.map((x) => x.id)}::text[]) and d.email_id = any(${answers.map((x) => x.email_id)}::text[])
        and d.id = a.id and d.email_id = a.email_id and d.project_id = a.project_id
        and d.status = 'pending' and d.attempt_count = a.attempt_count
      returning d.id, d.endpoint_id, d.project_id, d.last_attempt_at, d.created_at),
    counted as (${countSettled(sql, 'delivered')}),
    reset as (
      update webhook_endpoints w set consecutive_failures = 0, updated_at = now()
      from (select distinct endpoint_id, project_id from settled) s
      where w.id = s.endpoint_id and w.project_id = s.project_id and w.consecutive_failures <> 0
      returning w.id, w.status)
    select s.id, r.status as endpoint_status from settled s left join reset r on r.id = s.endpoint_id`;
  const endpointStatus = new Map(rows.map((r) => [r.id, r.endpointStatus ?? undefined]));
  return items.map(({ a }) => endpointStatus.get(a.id));
}

const deliveredSettlerFor = groupCommitPerPool((sql) => new GroupCommit((items: Delivered[]) => settleDelivered(sql, items), { maxBatch: 64 }));

/**
 * Settles a delivery, resolving once its outcome is committed with the endpoint's status if the
 * outcome changed it. 2xx answers settle many to a statement; other outcomes each have a
 * statement of their own, in a transaction shared with the others settling at the same moment.
 * Either way one WAL flush serves many deliveries.
 */
async function settle(sql: Sql, a: Attempt, outcome: Outcome, answered: Answered | null): Promise<string | undefined> {
  const endpointStatus = outcome.status === 'delivered' && answered
    ? await deliveredSettlerFor(sql).run({ a, answered })
    : (await commitShared(sql, (tx) => settleStatement(tx, a, outcome, answered)))[0]?.endpointStatus;
  recordWebhookOutcome(outcome.status === 'pending' ? 'retried' : outcome.status);
  return endpointStatus;
}

export function webhookBody(a: Attempt): string {
  // A project's own events (project.*, account.*, contact.*) carry an id that names no email.
  const emailId = a.type.startsWith('email.') ? a.emailId : null;
  return JSON.stringify({ id: a.eventId, type: a.type, email_id: emailId, created_at: a.eventCreatedAt.toISOString(), data: a.data });
}

export type AttemptDeps = { config: Config; sql: Sql; log: Logger; webhooks?: WebhookTransportOverrides };

export type Attempter = {
  transport: WebhookTransport;
  /**
   * One attempt of a pending delivery: a signed POST, or, for an endpoint that is switched off
   * (or `endpointOff`, known to be since the delivery was read), no request at all and a settle
   * as `endpoint_disabled`. Resolves once the attempt is answered, with `countsAgainst` set
   * when the outcome is a failure that counts toward the endpoint's auto-disable; `settled`
   * resolves once the outcome is committed, with the endpoint's status if the outcome changed it
   * (the tenth failure in a row disables it).
   */
  attempt(a: Attempt, endpointOff?: boolean): Promise<{ countsAgainst: boolean; settled: Promise<string | undefined> }>;
};

export function createAttempter(deps: AttemptDeps): Attempter {
  const { config, sql, log } = deps;
  const transport = createWebhookTransport(config, deps.webhooks);
  return {
    transport,
    async attempt(a, endpointOff = false) {
      if (endpointOff || a.endpointStatus !== 'active') {
        return { countsAgainst: false, settled: settle(sql, a, { status: 'failed', error: 'endpoint_disabled' }, null) };
      }
      let secret: string;
      try {
        secret = openSecret(config, a.secretEncrypted);
      } catch {
        // Sealed under another SECRET_KEY: no attempt can ever be signed, so the delivery ends here
        // rather than waiting forever. Re-saving the endpoint's secret in the dashboard fixes it.
        log.warn({ delivery: a.id, endpoint: a.endpointId }, 'webhook secret cannot be decrypted (SECRET_KEY changed)');
        return { countsAgainst: false, settled: settle(sql, a, { status: 'failed', error: 'secret_unreadable' }, null) };
      }
      const body = webhookBody(a);
      const timestamp = Math.floor(Date.now() / 1000);
      const result = await transport.post(a.url, body, {
        'content-type': 'application/json',
        'user-agent': USER_AGENT,
        'x-webhook-signature': signWebhook(secret, timestamp, body),
        'x-webhook-timestamp': String(timestamp),
        'x-webhook-event-id': a.eventId,
        'x-webhook-event-type': a.type,
        ...standardWebhookHeaders(secret, a.eventId, timestamp, body),
      });
      const answeredAt = new Date();
      const outcome = decideOutcome(result, a.attemptCount + 1, config.webhookRetryBaseMs, answeredAt.getTime());
      log.debug({ delivery: a.id, endpoint: a.endpointId, attempt: a.attemptCount + 1, status: outcome.status, response_status: result.responseStatus, error: outcome.error }, 'webhook attempt');
      return { countsAgainst: outcome.status === 'failed', settled: settle(sql, a, outcome, { result, at: answeredAt }) };
    },
  };
}
