import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { ApiError, ValidationError } from '../http/errors.ts';

/** Resend's error names; the Resend SDK reads `{statusCode, name, message}`. */
type ResendErrorName =
  | 'validation_error' | 'missing_api_key' | 'invalid_api_key' | 'restricted_api_key'
  | 'not_found' | 'invalid_idempotent_request' | 'rate_limit_exceeded' | 'application_error';

const STATUS: Record<ResendErrorName, number> = {
  validation_error: 422, missing_api_key: 401, invalid_api_key: 403, restricted_api_key: 401,
  not_found: 404, invalid_idempotent_request: 409, rate_limit_exceeded: 429, application_error: 500,
};

export function resendError(c: Context, name: ResendErrorName, message: string, headers: Record<string, string> = {}) {
  for (const [header, value] of Object.entries(headers)) c.header(header, value);
  return c.json({ statusCode: STATUS[name], name, message }, STATUS[name] as 422);
}

const BY_TYPE: Partial<Record<string, ResendErrorName>> = {
  authentication_failed: 'invalid_api_key',
  permission_denied: 'restricted_api_key',
  not_found: 'not_found',
  idempotency_key_reused: 'invalid_idempotent_request',
  rate_limit_exceeded: 'rate_limit_exceeded',
  payload_too_large: 'validation_error',
  email_not_scheduled: 'validation_error',
  contact_exists: 'validation_error',
  contact_property_exists: 'validation_error',
  broadcast_not_editable: 'validation_error',
  broadcast_not_cancelable: 'validation_error',
};

/** Mailroom's errors in Resend's shape: never `{error:{…}}` nor `{detail:[…]}` under /resend. */
export function toResendError(err: unknown, c: Context, log: (err: unknown) => void) {
  if (err instanceof ValidationError) {
    const message = err.detail.map((d) => `${d.loc.filter((p) => p !== 'body').join('.') || 'body'}: ${d.msg}`).join('; ');
    return resendError(c, 'validation_error', message);
  }
  if (err instanceof ApiError) {
    return resendError(c, BY_TYPE[err.type] ?? 'application_error', err.message, err.headers);
  }
  if (err instanceof HTTPException && err.status < 500) return resendError(c, err.status === 404 ? 'not_found' : 'validation_error', err.message || 'Bad request.');
  log(err);
  return resendError(c, 'application_error', 'Internal server error.');
}
