import type { OpenAPIHono } from '@hono/zod-openapi';
import { bodyLimit } from 'hono/body-limit';
import type { AppEnv } from '../http/context.ts';
import { ApiError } from '../http/errors.ts';
import type { Sql, TxSql } from '../platform/db.ts';
import { findConnectionByTopicArn } from '../providers/connections.ts';
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
      const conn = await findConnectionByTopicArn(sql, config, msg.TopicArn);
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
      // the event while marking the message handled.
      const record = parseJson(msg.Message);
      const outcome = await sql.begin(async (tx) => {
        if (!(await claimMessage(tx, msg.MessageId))) return 'duplicate' as const;
        return ingestSesRecord(tx, log, projectId, record);
      });
      log.debug({ projectId, messageId: msg.MessageId, outcome }, 'SNS notification handled');
      return c.json({ status: 'ok' }, 200);
    },
  );
}
