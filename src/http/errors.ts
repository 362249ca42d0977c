import { z } from '@hono/zod-openapi';
import { isWellFormedId } from '../platform/ids.ts';
import type { ZodError } from 'zod';

/** Stable error types callers branch on; each has one status. */
export type ErrorType =
  | 'authentication_failed'
  | 'permission_denied'
  | 'not_found'
  | 'email_not_scheduled'
  | 'broadcast_not_editable'
  | 'broadcast_not_cancelable'
  | 'endpoint_disabled'
  | 'domain_receiving_on'
  | 'contact_exists'
  | 'contact_property_exists'
  | 'idempotency_key_reused'
  | 'payload_too_large'
  | 'rate_limit_exceeded'
  | 'invalid_signature'
  | 'internal_error'
  | 'not_ready';

const STATUS: Record<ErrorType, 401 | 403 | 404 | 409 | 413 | 429 | 500 | 503> = {
  authentication_failed: 401,
  invalid_signature: 403,
  permission_denied: 403,
  not_found: 404,
  email_not_scheduled: 409,
  broadcast_not_editable: 409,
  broadcast_not_cancelable: 409,
  endpoint_disabled: 409,
  domain_receiving_on: 409,
  contact_exists: 409,
  contact_property_exists: 409,
  idempotency_key_reused: 409,
  payload_too_large: 413,
  rate_limit_exceeded: 429,
  internal_error: 500,
  not_ready: 503,
};

export class ApiError extends Error {
  readonly status: number;
  /** Fields beside `type` and `message` that name what the error is about, e.g. `contact_id`. */
  fields: Record<string, string> = {};
  constructor(readonly type: ErrorType, message: string, readonly headers: Record<string, string> = {}) {
    super(message);
    this.status = STATUS[type];
  }
  with(fields: Record<string, string>): this {
    this.fields = fields;
    return this;
  }
  toJSON() {
    return { error: { type: this.type, message: this.message, ...this.fields } };
  }
}

export type ValidationDetail = {
  loc: (string | number)[];
  msg: string;
  type: string;
  ctx?: Record<string, unknown>;
  input?: unknown;
};

/** A 422 lists at most this many problems; past it, one `too_many_errors` entry says how many. */
export const MAX_PROBLEMS = 100;

function capped(detail: ValidationDetail[]): ValidationDetail[] {
  if (detail.length <= MAX_PROBLEMS) return detail;
  return [
    ...detail.slice(0, MAX_PROBLEMS),
    { loc: ['body'], msg: `${detail.length} problems were found; the first ${MAX_PROBLEMS} are listed`, type: 'too_many_errors', ctx: { count: detail.length, listed: MAX_PROBLEMS } },
  ];
}

/** A 422 raised by hand (rules zod can't express, such as the assembled message size). */
export class ValidationError extends Error {
  readonly detail: ValidationDetail[];
  constructor(detail: ValidationDetail[]) {
    const listed = capped(detail);
    super(listed.map((d) => d.msg).join('; '));
    this.detail = listed;
  }
  toJSON() {
    return { detail: this.detail };
  }
}

const LOCATION: Record<string, string> = { json: 'body', query: 'query', param: 'path', header: 'header', form: 'body' };

/** Maps zod issues onto the spec's `detail[{loc,msg,type,ctx}]` shape, FastAPI-style type names. */
export function validationErrorFromZod(error: ZodError, target: string): ValidationError {
  const root = LOCATION[target] ?? target;
  return new ValidationError(
    error.issues.map((issue) => {
      const loc = [root, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
      const i = issue as typeof issue & Record<string, unknown>;
      switch (issue.code) {
        case 'invalid_type':
          if (/received undefined/.test(issue.message)) return { loc, msg: 'Field required', type: 'missing' };
          return { loc, msg: `Input should be a valid ${String(i.expected)}`, type: `${String(i.expected)}_type` };
        case 'too_big':
          if (i.origin === 'string') return { loc, msg: `String should have at most ${i.maximum} characters`, type: 'string_too_long', ctx: { max_length: i.maximum } };
          if (i.origin === 'array') return { loc, msg: `List should have at most ${i.maximum} items`, type: 'too_long', ctx: { max_length: i.maximum } };
          return { loc, msg: `Input should be less than or equal to ${i.maximum}`, type: 'less_than_equal', ctx: { le: i.maximum } };
        case 'too_small':
          if (i.origin === 'string') return { loc, msg: `String should have at least ${i.minimum} characters`, type: 'string_too_short', ctx: { min_length: i.minimum } };
          if (i.origin === 'array') return { loc, msg: `List should have at least ${i.minimum} items`, type: 'too_short', ctx: { min_length: i.minimum } };
          return { loc, msg: `Input should be greater than or equal to ${i.minimum}`, type: 'greater_than_equal', ctx: { ge: i.minimum } };
        case 'invalid_value':
          return { loc, msg: `Input should be ${(i.values as unknown[]).map((v) => `'${String(v)}'`).join(' or ')}`, type: 'enum', ctx: { expected: i.values } };
        case 'invalid_format':
          return { loc, msg: issue.message, type: 'string_pattern_mismatch', ctx: { pattern: i.pattern ?? i.format } };
        case 'unrecognized_keys':
          return { loc, msg: `Extra inputs are not permitted: ${(i.keys as string[]).join(', ')}`, type: 'extra_forbidden' };
        case 'custom': {
          const params = (i.params ?? {}) as { type?: string; ctx?: Record<string, unknown> };
          return { loc, msg: issue.message, type: params.type ?? 'value_error', ...(params.ctx ? { ctx: params.ctx } : {}) };
        }
        default:
          return { loc, msg: issue.message, type: 'value_error' };
      }
    }),
  );
}

export const ErrorResponseSchema = z
  .object({
    error: z.object({
      type: z.string().openapi({ example: 'not_found' }),
      message: z.string().openapi({ example: 'Email not found.' }),
    }),
  })
  .openapi('ErrorResponse');

export const HTTPValidationErrorSchema = z
  .object({
    detail: z.array(
      z.object({
        loc: z.array(z.union([z.string(), z.number().int()])),
        msg: z.string(),
        type: z.string(),
        ctx: z.record(z.string(), z.unknown()).optional(),
        input: z.unknown().optional(),
      }),
    ),
  })
  .openapi('HTTPValidationError');

const DESCRIPTIONS = {
  401: 'Missing, invalid or revoked API key.',
  403: 'The key lacks the permission this route needs (`permission_denied`).',
  404: 'Not found, or owned by another project.',
  409: 'Conflict with the current state (`idempotency_key_reused`, `email_not_scheduled`, `endpoint_disabled`, `domain_receiving_on`, `contact_exists` with `contact_id`, `contact_property_exists`).',
  413: 'Request body too large to read.',
  422: 'Validation failed.',
  429: 'Rate limit exceeded.',
} as const;

/** The shared error responses a route declares, so the schema shows every shape it can answer. */
export function errorResponses<S extends keyof typeof DESCRIPTIONS>(...statuses: S[]) {
  const out = {} as Record<S, { description: string; content: { 'application/json': { schema: typeof ErrorResponseSchema | typeof HTTPValidationErrorSchema } } }>;
  for (const status of statuses) {
    out[status] = {
      description: DESCRIPTIONS[status],
      content: { 'application/json': { schema: status === 422 ? HTTPValidationErrorSchema : ErrorResponseSchema } },
    };
  }
  return out;
}

/**
 * An id from a path or cursor that cannot name anything (wrong prefix, not 26 Crockford base32
 * characters, control bytes) is not found, the same answer as an id of another project, and it
 * never reaches a query.
 */
export function requireId(kind: Parameters<typeof isWellFormedId>[0], value: string, message: string): string {
  if (!isWellFormedId(kind, value)) throw new ApiError('not_found', message);
  return value;
}
