import { Agent, request, type Dispatcher } from 'undici';
import type { Config } from '../platform/config.ts';
import { guardedConnector } from './connector.ts';
import { destinationPolicy, systemResolver, type Resolver } from './destination.ts';
import { normaliseTransportError } from './errors.ts';

export const USER_AGENT = 'mailroom-webhooks/0.1.0';
export const DEFAULT_TIMEOUT_MS = 10_000;
export const RESPONSE_BODY_LIMIT = 4096;

/** What tests may swap in through the worker deps; production leaves all of it unset. */
export type WebhookTransportOverrides = { resolve?: Resolver; ca?: string | Buffer; timeoutMs?: number };

/** What one POST came to. `responseStatus` is null when no answer arrived. */
export type AttemptResult = {
  responseStatus: number | null;
  responseBody: string | null;
  retryAfter: string | null;
  error: string | null;
};

export type WebhookTransport = {
  /** How long one attempt may take, connect to captured body. */
  timeoutMs: number;
  post(url: string, body: string, headers: Record<string, string>): Promise<AttemptResult>;
  close(): Promise<void>;
};

const TEXT_LIKE = /^(text\/[\w.+-]+|application\/([\w.-]+\+)?(json|xml))$/i;

/** Reads at most `limit` bytes; a longer body is cut off and the rest never read. */
async function readCapped(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk as Buffer);
    size += (chunk as Buffer).length;
    if (size >= limit) break;
  }
  // PostgreSQL text cannot hold NUL; a half-cut character decodes to U+FFFD.
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8').replaceAll('\u0000', '');
}

export function createWebhookTransport(config: Config, overrides: WebhookTransportOverrides = {}): WebhookTransport {
  const timeoutMs = overrides.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const agent = new Agent({
    connect: guardedConnector({ policy: destinationPolicy(config), resolve: overrides.resolve ?? systemResolver, timeoutMs, ca: overrides.ca }),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });

  return {
    timeoutMs,
    async post(url, body, headers) {
      // One deadline for the whole attempt: connect, headers and the captured body.
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        // undici.request never follows redirects; a 3xx comes back as it is.
        const res = await request(url, { method: 'POST', body, headers, dispatcher: agent, signal });
        const type = String(res.headers['content-type'] ?? '').split(';')[0]!.trim();
        let responseBody: string | null = null;
        try {
          if (TEXT_LIKE.test(type)) responseBody = await readCapped(res.body, RESPONSE_BODY_LIMIT);
          else await res.body.dump({ limit: RESPONSE_BODY_LIMIT });
        } catch {
          // The status is the answer; a body that stalls or breaks only costs the log its copy.
          res.body.destroy();
        }
        const retryAfter = res.headers['retry-after'];
        return {
          responseStatus: res.statusCode,
          responseBody,
          retryAfter: typeof retryAfter === 'string' ? retryAfter : null,
          error: null,
        };
      } catch (err) {
        return { responseStatus: null, responseBody: null, retryAfter: null, error: normaliseTransportError(err, signal) };
      }
    },
    close: () => agent.close(),
  };
}
