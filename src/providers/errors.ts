/** The email `last_error` values. `provider_unavailable` means retries ran out. */
export type LastError =
  | 'domain_not_verified'
  | 'recipient_suppressed'
  | 'message_rejected'
  | 'provider_auth_failed'
  | 'sending_paused'
  | 'provider_unavailable'
  // Retention (§18.5): still unsent after RETENTION_DAYS, or its body purged before it went.
  | 'expired before it could be sent';

/** What to do about a failed attempt: settle the email as failed, or try again later. */
export type Classified =
  | { retry: false; lastError: LastError; message: string }
  | { retry: true; message: string; pace?: 'throttled' | 'daily_quota' };

/** A failure already classified where it happened (e.g. credentials that no longer decrypt). */
export class ProviderFailure extends Error {
  constructor(readonly lastError: LastError, message: string) {
    super(message);
  }
}

const AUTH = new Set([
  'InvalidClientTokenId', 'SignatureDoesNotMatch', 'UnrecognizedClientException', 'AccessDenied',
  'AccessDeniedException', 'ExpiredToken', 'ExpiredTokenException', 'InvalidSignatureException',
  'MissingAuthenticationToken', 'MissingAuthenticationTokenException', 'IncompleteSignature',
  'IncompleteSignatureException', 'InvalidAccessKeyId', 'NotAuthorized', 'AuthFailure', 'CredentialsProviderError',
]);
// The account or its configuration set is stopped from sending; retrying changes nothing until a human acts.
const PAUSED = new Set(['AccountSuspendedException', 'SendingPausedException']);
// SES refusing to go faster: not the message's fault, so it costs no attempt.
const THROTTLING = new Set(['TooManyRequestsException', 'Throttling', 'ThrottlingException']);
const THROTTLING_TEXT = /maximum sending rate exceeded/i;
const DAILY_QUOTA_TEXT = /daily message quota exceeded/i;
const UNAVAILABLE = new Set([
  'LimitExceededException', 'RequestLimitExceeded', 'ServiceUnavailable', 'ServiceUnavailableException', 'InternalFailure',
  'InternalServerError', 'InternalServiceError', 'RequestTimeout', 'RequestTimeoutException',
]);
const NETWORK_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN',
  'EHOSTUNREACH', 'ENETUNREACH', 'ENETDOWN', 'ECONNECTION', 'ESOCKET', 'EDNS', 'ETLS',
]);
// SES answers an unverified From (or, in the sandbox, recipient) with MessageRejected and this wording.
const UNVERIFIED_TEXT = /not verified|unverified|failed the check/i;

type AwsLike = Error & {
  code?: string;
  responseCode?: number;
  $fault?: 'client' | 'server';
  $metadata?: { httpStatusCode?: number };
  cause?: unknown;
};

/** The provider's own explanation, one line and bounded; credentials never appear in these. */
function brief(err: AwsLike): string {
  return (err.message || err.name).replace(/\s+/g, ' ').trim().slice(0, 200);
}

/**
 * Maps whatever a send attempt threw (SES SDK errors, SMTP errors from the sink transport,
 * network errors) onto a `last_error` or a retry. Unknown errors are retried: with a bounded
 * number of attempts that ends as `provider_unavailable`, never as an email stuck in `sending`.
 */
export function classifySendError(error: unknown): Classified {
  if (error instanceof ProviderFailure) return { retry: false, lastError: error.lastError, message: error.message };
  const err = (error instanceof Error ? error : new Error(String(error))) as AwsLike;
  const name = err.name;
  const status = err.$metadata?.httpStatusCode;

  if (name === 'MessageRejected') {
    return UNVERIFIED_TEXT.test(err.message)
      ? { retry: false, lastError: 'domain_not_verified', message: `The provider refused the sender identity: ${brief(err)}` }
      : { retry: false, lastError: 'message_rejected', message: `The provider rejected the message: ${brief(err)}` };
  }
  if (name === 'MailFromDomainNotVerifiedException') {
    return { retry: false, lastError: 'domain_not_verified', message: 'The custom MAIL FROM domain is not verified with the provider.' };
  }
  if (AUTH.has(name) || status === 401 || status === 403 || err.code === 'EAUTH') {
    return { retry: false, lastError: 'provider_auth_failed', message: `The provider refused the credentials (${name}). Reconnect the project with valid keys.` };
  }
  if (PAUSED.has(name)) {
    return { retry: false, lastError: 'sending_paused', message: `Sending is paused for this provider account (${name}).` };
  }
  if (DAILY_QUOTA_TEXT.test(err.message)) {
    return { retry: true, pace: 'daily_quota', message: `The provider account's 24-hour sending quota is spent (${name}).` };
  }
  if (THROTTLING.has(name) || THROTTLING_TEXT.test(err.message)) {
    return { retry: true, pace: 'throttled', message: `The provider throttled the send (${name}).` };
  }
  if (UNAVAILABLE.has(name) || status === 429 || (status !== undefined && status >= 500) || err.$fault === 'server') {
    return { retry: true, message: `The provider is unavailable or throttling (${name}${status ? ` ${status}` : ''}).` };
  }
  if (status !== undefined) {
    return { retry: false, lastError: 'message_rejected', message: `The provider rejected the request (${name}): ${brief(err)}` };
  }
  // SMTP replies from the sink transport: 5xx is a refusal of this message, 4xx is "later".
  if (typeof err.responseCode === 'number') {
    return err.responseCode >= 500
      ? { retry: false, lastError: 'message_rejected', message: `The mail server rejected the message (${err.responseCode}).` }
      : { retry: true, message: `The mail server deferred the message (${err.responseCode}).` };
  }
  const code = err.code ?? (err.cause as { code?: string } | undefined)?.code;
  if ((code && (NETWORK_CODES.has(code) || code.startsWith('UND_ERR'))) || name === 'TimeoutError' || name === 'AbortError') {
    return { retry: true, message: `Could not reach the provider (${code ?? name}).` };
  }
  return { retry: true, message: `Unexpected error while sending (${name}).` };
}

/** A paced request did not leave by its `leaveBy`; nothing was sent, and no attempt counts. */
export class SlotMissed extends Error {
  constructor() {
    super('the send slot passed before the request left');
    this.name = 'SlotMissed';
  }
}
