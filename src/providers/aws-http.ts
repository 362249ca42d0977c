import type { NodeHttpHandlerOptions } from '@smithy/types';

/**
 * How long an AWS call may take, per attempt. `headersMs` runs from the request until the
 * response's headers; `idleMs` is the most a socket may stay silent at any point, so a body that
 * stops arriving ends too; `connectMs` is the TCP (and TLS) connect.
 */
export type AwsDeadlines = { connectMs: number; headersMs: number; idleMs: number };

/**
 * Every AWS client's deadlines, in one place. Nothing Mailroom calls may wait for ever: a stalled
 * dependency must cost the one message or job that asked, never a worker slot, a queue or a
 * shutdown.
 * - S3 `GetObject`: 10 s for the headers, then at most 30 s between body bytes.
 * - SQS: 10 s per call; `ReceiveMessage` adds its long-poll wait to the headers deadline, and its
 *   socket may be silent for the wait (at most 20 s) while SQS holds the poll open.
 * - SES v2 (`SendEmail`, `GetAccount`, identities): 30 s, as the send's own abort.
 * - SES v1 (receipt rules, at set-up): 10 s.
 */
export const AWS_DEADLINES = {
  s3: { connectMs: 5_000, headersMs: 10_000, idleMs: 30_000 },
  sqs: { connectMs: 5_000, headersMs: 10_000, idleMs: 30_000 },
  sesv2: { connectMs: 5_000, headersMs: 30_000, idleMs: 30_000 },
  ses: { connectMs: 5_000, headersMs: 10_000, idleMs: 10_000 },
} as const satisfies Record<string, AwsDeadlines>;

/** The `requestHandler` of an AWS SDK client that keeps these deadlines (a timeout throws, it never only warns). */
export function awsRequestHandler(d: AwsDeadlines): NodeHttpHandlerOptions {
  return { connectionTimeout: d.connectMs, requestTimeout: d.headersMs, throwOnRequestTimeout: true, socketTimeout: d.idleMs };
}
