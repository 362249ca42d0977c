import type { Config } from '../platform/config.ts';
import type { Sql, TxSql } from '../platform/db.ts';
import { decrypt, deriveKey, encrypt } from '../platform/crypto.ts';
import { requireProject } from '../projects/service.ts';
import { ServiceError } from '../platform/errors.ts';
import type { Logger } from '../platform/log.ts';
import { recordAudit } from '../audit/record.ts';

export type ProviderConnection = {
  projectId: string;
  provider: 'ses';
  region: string;
  /** The `ses_accounts` row whose pace and daily count the connection shares. */
  sesAccountId: string;
  accessKeyId: string;
  secretAccessKey: string;
  configurationSet: string | null;
  eventsQueueUrl: string | null;
  snsTopicArn: string | null;
  updatedAt: Date;
};

type ConnectionRow = Omit<ProviderConnection, 'secretAccessKey'> & { secretAccessKeyEncrypted: Buffer };

/** Connects and disconnects are announced here, so every worker's queue polling follows at once. */
export const CONNECTIONS_CHANNEL = 'mailroom_provider_connections';

const REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;

export type ConnectInput = {
  projectId: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  configurationSet?: string;
  eventsQueueUrl?: string;
  snsTopicArn?: string;
  /** An operator's cap below the account's MaxSendRate (messages per second). */
  maxSendRate?: number;
  /** The account's quota when already read; otherwise the worker reads it. */
  sendQuota?: { maxSendRate: number; max24HourSend: number };
};

function reveal(config: Config, row: ConnectionRow): ProviderConnection {
  const { secretAccessKeyEncrypted, ...rest } = row;
  return { ...rest, secretAccessKey: decrypt(deriveKey(config.secretKey, 'provider-credentials'), secretAccessKeyEncrypted) };
}

/** Refuses a connection that could never work, before anything is asked of SES or stored. */
export async function checkConnectInput(sql: Sql, input: ConnectInput) {
  await requireProject(sql, input.projectId);
  if (!REGION.test(input.region)) throw new ServiceError('invalid_input', `region "${input.region}" is not an AWS region such as us-east-1`);
  if (!input.accessKeyId.trim() || !input.secretAccessKey.trim()) throw new ServiceError('invalid_input', 'access key id and secret access key are required');
  if (input.eventsQueueUrl && !/^https?:\/\//.test(input.eventsQueueUrl)) throw new ServiceError('invalid_input', 'events queue URL must be an http(s) SQS queue URL');
  if (input.maxSendRate !== undefined && !(input.maxSendRate > 0 && Number.isFinite(input.maxSendRate))) {
    throw new ServiceError('invalid_input', 'max send rate must be a positive number of messages per second');
  }
  if (input.snsTopicArn && !/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]+$/.test(input.snsTopicArn)) throw new ServiceError('invalid_input', 'SNS topic ARN must look like arn:aws:sns:REGION:ACCOUNT:NAME');
}

/** Stores (or replaces) the project's SES connection; the secret is sealed with AES-256-GCM. */
export async function connectProvider(sql: Sql, config: Config, input: ConnectInput) {
  await checkConnectInput(sql, input);
  const sealed = encrypt(deriveKey(config.secretKey, 'provider-credentials'), input.secretAccessKey.trim());
  // The account is the access key id in its region (SES's quota is the account's): projects
  // connected with the same one share its row, its pace and its daily count. Known by a digest,
  // so the row keeps no copy of the key. A quota read now replaces the account's; without one,
  // the account keeps what it knew.
  await sql.begin(async (tx) => {
    await tx`
      with account as (
        insert into ses_accounts (region, access_key_digest, max_send_rate, max_24_hour_send, quota_checked_at)
        values (${input.region}, sha256(convert_to(${input.accessKeyId.trim()}::text, 'UTF8')),
          ${input.sendQuota?.maxSendRate ?? null}, ${input.sendQuota?.max24HourSend ?? null}, ${input.sendQuota ? tx`now()` : null})
        on conflict (region, access_key_digest) do update set
          max_send_rate = coalesce(excluded.max_send_rate, ses_accounts.max_send_rate),
          max_24_hour_send = coalesce(excluded.max_24_hour_send, ses_accounts.max_24_hour_send),
          quota_checked_at = coalesce(excluded.quota_checked_at, ses_accounts.quota_checked_at)
        returning id
      )
      insert into provider_connections (project_id, region, access_key_id, secret_access_key_encrypted,
        configuration_set, events_queue_url, sns_topic_arn, rate_cap, ses_account_id)
      select ${input.projectId}, ${input.region}, ${input.accessKeyId.trim()}, ${sealed},
        ${input.configurationSet ?? null}, ${input.eventsQueueUrl ?? null}, ${input.snsTopicArn ?? null},
        ${input.maxSendRate ?? null}, account.id
      from account
      on conflict (project_id) do update set
        region = excluded.region, access_key_id = excluded.access_key_id,
        secret_access_key_encrypted = excluded.secret_access_key_encrypted,
        configuration_set = excluded.configuration_set, events_queue_url = excluded.events_queue_url,
        sns_topic_arn = excluded.sns_topic_arn, rate_cap = excluded.rate_cap,
        ses_account_id = excluded.ses_account_id, updated_at = now()`;
    // The access keys are the credential; the entry names the account by region and settings only.
    await recordAudit(tx, {
      action: 'provider.connected', projectId: input.projectId, target: { type: 'provider', id: input.projectId },
      changes: {
        provider: 'ses', region: input.region, configuration_set: input.configurationSet ?? null, events_queue_url: input.eventsQueueUrl ?? null,
        sns_topic_arn: input.snsTopicArn ?? null, max_send_rate: input.maxSendRate ?? null,
      },
    });
  });
  await sql`select pg_notify(${CONNECTIONS_CHANNEL}, ${input.projectId})`;
  return {
    project: input.projectId,
    provider: 'ses' as const,
    region: input.region,
    max_send_rate: effectiveRate(input.sendQuota?.maxSendRate, input.maxSendRate),
    max_24_hour_send: input.sendQuota?.max24HourSend ?? null,
  };
}

export async function disconnectProvider(sql: Sql, projectId: string) {
  await requireProject(sql, projectId);
  await sql.begin(async (tx) => {
    const removed = await tx`delete from provider_connections where project_id = ${projectId}`;
    if (removed.count > 0) await recordAudit(tx, { action: 'provider.disconnected', projectId, target: { type: 'provider', id: projectId }, changes: { provider: 'ses' } });
  });
  await sql`select pg_notify(${CONNECTIONS_CHANNEL}, ${projectId})`;
  return { project: projectId, provider: null };
}

const CONNECTION_COLUMNS = (sql: Sql | TxSql) =>
  sql`project_id, provider, region, ses_account_id::text, access_key_id, secret_access_key_encrypted, configuration_set, events_queue_url, sns_topic_arn, updated_at`;

/** The project's connection with its secret decrypted, or undefined: the project sends to the sink. */
export async function getProviderConnection(sql: Sql, config: Config, projectId: string) {
  const [row] = await sql<[ConnectionRow?]>`
    select ${CONNECTION_COLUMNS(sql)} from provider_connections where project_id = ${projectId}`;
  return row ? reveal(config, row) : undefined;
}

/** Connections with an events queue, for the SQS poller. */
export async function listQueueConnections(sql: Sql, config: Config, log?: Logger) {
  const rows = await sql<ConnectionRow[]>`
    select ${CONNECTION_COLUMNS(sql)} from provider_connections where events_queue_url is not null order by project_id`;
  return revealEach(config, rows, log);
}

/** Every connection, for the quota refresh. */
export async function listConnections(sql: Sql, config: Config, log?: Logger) {
  const rows = await sql<ConnectionRow[]>`select ${CONNECTION_COLUMNS(sql)} from provider_connections order by project_id`;
  return revealEach(config, rows, log);
}

/** One connection sealed under another SECRET_KEY is logged and skipped, never stops the others. */
function revealEach(config: Config, rows: ConnectionRow[], log?: Logger): ProviderConnection[] {
  const out: ProviderConnection[] = [];
  for (const row of rows) {
    try {
      out.push(reveal(config, row));
    } catch {
      log?.warn({ projectId: row.projectId }, 'provider connection cannot be decrypted (SECRET_KEY changed); reconnect the project');
    }
  }
  return out;
}

/** The rate sends are paced to: the account's, or the operator's cap when lower. */
export function effectiveRate(accountRate: number | null | undefined, cap: number | null | undefined): number | null {
  const rates = [accountRate, cap].filter((r): r is number => typeof r === 'number');
  return rates.length ? Math.min(...rates) : null;
}

/**
 * The connections that trust this SNS topic, for HTTPS push: the topic speaks for their projects
 * and their SES accounts only.
 */
export async function findConnectionsByTopicArn(sql: Sql, config: Config, topicArn: string, log?: Logger) {
  const rows = await sql<ConnectionRow[]>`
    select ${CONNECTION_COLUMNS(sql)} from provider_connections where sns_topic_arn = ${topicArn} order by project_id limit 100`;
  return revealEach(config, rows, log);
}
