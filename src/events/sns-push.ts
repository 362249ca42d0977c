import type { OpenAPIHono } from '@hono/zod-openapi';
import { bodyLimit } from 'hono/body-limit';
import type { AppEnv } from '../http/context.ts';
import { ApiError } from '../http/errors.ts';
import type { Sql, TxSql } from '../platform/db.ts';
import { findConnectionsByTopicArn, type ProviderConnection } from '../providers/connections.ts';
import { s3ObjectStore } from '../providers/s3.ts';
import type { Logger } from '../platform/log.ts';
import type { Config } from '../platform/config.ts';
import { prepareReceived } from '../inbound/ingest.ts';
import { storeReceivedIn } from '../inbound/store.ts';
import { ingestSesRecord } from './ingest.ts';
import { createSnsFetch, type SnsFetch } from './sns-fetch.ts';
import { isSnsUrl, SnsMessage, topicRegion, verifySnsSignature } from './sns-verify.ts';

/** The most a notification may be; SNS messages are at most 256 KiB. */
const MAX_BODY_BYTES = 256 * 1024;

let defaultFetch: SnsFetch | undefined;

function invalid(message = 'The SNS message signature could not be verified.'): ApiError {
  return new ApiError('invalid_signature', message);
}

/** Marks the SNS MessageId handled; false when it already was (SNS retries until it hears 2xx). */
async function claimMessage(sql: Sql | TxSql, messageId: string) {
  const [row] = await sql`insert into sns_messages (message_id) values (${messageId}) on conflict do nothing returning message_id`;
  return row !== undefined;
}

/**
 * A `Received` notification pushed by the topic: stored only for projects of the SES accounts of
 * the connections naming the topic, from the bucket their receiving set-up named (§22.2), and
 * read with the keys of the first of them. The MessageId claim commits with the rows. An S3
 * failure throws, so SNS retries.
 */
async function handleReceived(deps: { sql: Sql; config: Config; log: Logger }, conns: ProviderConnection[], messageId: string, record: unknown) {
  const source = { sesAccountIds: [...new Set(conns.map((c) => c.sesAccountId))], store: () => s3ObjectStore(deps.config, conns[0]!) };
  const prepared = await prepareReceived(deps, source, record);
  return deps.sql.begin(async (tx) => {
    if (!(await claimMessage(tx, messageId))) return 'duplicate' as const;
    if (typeof prepared === 'string') return prepared;
    return (await storeReceivedIn(tx, [prepared]))[0]!.length ? 'stored' as const : 'duplicate' as const;
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * `POST /v1/events/ses`, SNS's HTTPS subscription. Authenticated by the SNS signature rather
 * than an API key, and left out of the OpenAPI document. Every message that cannot be proven to
 * come from a topic a project trusts answers 403 `invalid_signature`.
 */
export function registerSnsPushRoute(app: OpenAPIHono<AppEnv>) {
  app.post(
    '/v1/events/ses',
    bodyLimit({ maxSize: MAX_BODY_BYTES, onError: () => { throw new ApiError('payload_too_large', 'SNS message too large.'); } }),
    async (c) => {
      const { sql, config, log } = c.var.deps;
      const snsFetch = c.var.deps.snsFetch ?? (defaultFetch ??= createSnsFetch());

      const parsed = SnsMessage.safeParse(parseJson(await c.req.text()));
      if (!parsed.success) throw invalid('Not a signed SNS message.');
      const msg = parsed.data;
      if (!isSnsUrl(msg.SigningCertURL, { pem: true, region: topicRegion(msg.TopicArn) })) throw invalid();
      const conns = await findConnectionsByTopicArn(sql, config, msg.TopicArn, log);
      const conn = conns[0];
      if (!conn) throw invalid();

      const verified = await verifySnsSignature(msg, snsFetch.cert).catch((err: Error) => {
        // Unverifiable is unverified; the certificate is cached once fetched, so this is rare.
        log.warn({ err: err.message, topicArn: msg.TopicArn }, 'could not fetch the SNS signing certificate');
        return false;
      });
      if (!verified) throw invalid();
      const projectId = conn.projectId;

      if (msg.Type === 'SubscriptionConfirmation') {
        if (!isSnsUrl(msg.SubscribeURL, { region: topicRegion(msg.TopicArn) })) throw invalid('SubscribeURL is not an SNS address.');
        const [seen] = await sql`select 1 from sns_messages where message_id = ${msg.MessageId}`;
        if (!seen) {
          try {
            await snsFetch.confirm(msg.SubscribeURL!);
          } catch (err) {
            log.warn({ err: (err as Error).message, projectId, topicArn: msg.TopicArn }, 'SNS subscription confirmation failed');
            throw new ApiError('internal_error', 'Internal server error.');
          }
          await claimMessage(sql, msg.MessageId);
          log.info({ projectId, topicArn: msg.TopicArn }, 'SNS subscription confirmed');
        }
        return c.json({ status: 'ok' }, 200);
      }

      if (msg.Type === 'UnsubscribeConfirmation') {
        log.warn({ projectId, topicArn: msg.TopicArn }, 'SNS subscription removed; events stop arriving until it is re-subscribed');
        return c.json({ status: 'ok' }, 200);
      }

      // The MessageId claim and the event commit together, so a crash between them cannot lose
      // the event while marking the message handled. A sending event belongs to the project that
      // sent its email, among those trusting the topic.
      const record = parseJson(msg.Message);
      if ((record as { notificationType?: unknown } | null)?.notificationType === 'Received') {
        const outcome = await handleReceived({ sql, config, log }, conns, msg.MessageId, record);
        log.debug({ topicArn: msg.TopicArn, messageId: msg.MessageId, outcome }, 'SNS Received notification handled');
        return c.json({ status: 'ok' }, 200);
      }
      const outcome = await sql.begin(async (tx) => {
        if (!(await claimMessage(tx, msg.MessageId))) return 'duplicate' as const;
        let result = 'unknown_email';
        for (const { projectId: candidate } of conns) {
          result = await ingestSesRecord(tx, log, candidate, record);
          if (result !== 'unknown_email') break;
        }
        return result;
      });
      log.debug({ projectId, messageId: msg.MessageId, outcome }, 'SNS notification handled');
      return c.json({ status: 'ok' }, 200);
    },
  );
}
