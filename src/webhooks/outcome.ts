import type { AttemptResult } from './transport.ts';

/** 2xx delivers; 5xx, 429, timeouts and connection failures retry; other 4xx fail at once. */
export const MAX_ATTEMPTS = 6;
export const AUTO_DISABLE_AFTER = 10;
export const RETRY_AFTER_CAP_MS = 160_000;
const JITTER = 0.3;

export type Outcome =
  | { status: 'delivered'; error: null }
  | { status: 'pending'; error: string; runAt: Date }
  | { status: 'failed'; error: string };

/** Delay before attempt k+1, k attempts made: base × 2^k ± 30% (10, 20, 40, 80, 160 s at base 5 s). */
export function backoffMs(baseMs: number, attemptsMade: number, random: () => number = Math.random): number {
  return Math.round(baseMs * 2 ** attemptsMade * (1 + (random() * 2 - 1) * JITTER));
}

/** `Retry-After` as seconds or an HTTP date, in ms from now, capped; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  const ms = /^\d+$/.test(trimmed) ? Number(trimmed) * 1000 : Date.parse(trimmed) - now;
  if (!Number.isFinite(ms)) return undefined;
  return Math.min(Math.max(ms, 0), RETRY_AFTER_CAP_MS);
}

/** The error word an answer earns: none for 2xx, `redirect_not_followed` for 3xx, else `http_error`. */
function errorFor(result: AttemptResult): string | null {
  const s = result.responseStatus;
  if (s === null) return result.error ?? 'connection_failed';
  if (s >= 200 && s < 300) return null;
  if (s >= 300 && s < 400) return 'redirect_not_followed';
  return 'http_error';
}

function isRetryable(result: AttemptResult): boolean {
  const s = result.responseStatus;
  // A destination refused by §6.4 is not a network hiccup: trying again only gives a rebinding attacker more tries.
  if (s === null) return result.error !== 'destination_blocked';
  return s === 429 || s >= 500;
}

/** What attempt number `attempt` (1-based) leads to. */
export function decideOutcome(result: AttemptResult, attempt: number, baseMs: number, now = Date.now()): Outcome {
  const error = errorFor(result);
  if (error === null) return { status: 'delivered', error: null };
  if (!isRetryable(result) || attempt >= MAX_ATTEMPTS) return { status: 'failed', error };
  let delay = backoffMs(baseMs, attempt);
  if (result.responseStatus === 429 || result.responseStatus === 503) {
    // Honoured up to the cap: never sooner than the receiver asked, unless it asked for more than 160 s.
    delay = Math.max(delay, retryAfterMs(result.retryAfter, now) ?? 0);
  }
  return { status: 'pending', error, runAt: new Date(now + delay) };
}
