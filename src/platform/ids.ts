import { monotonicFactory } from 'ulid';

const ulid = monotonicFactory();

export const ID_PREFIX = {
  project: 'proj_',
  key: 'key_',
  email: 'email_',
  domain: 'dom_',
  webhook: 'wh_',
  delivery: 'whd_',
  event: 'evt_',
  sinkMessage: 'msg_',
  owner: 'usr_',
} as const;

/** Prefix + a 26-character ULID: lexical order is creation order, which cursor paging uses. */
export function newId(kind: keyof typeof ID_PREFIX): string {
  return ID_PREFIX[kind] + ulid();
}

const ULID_BODY = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/**
 * Whether `value` is the prefix of `kind` plus 26 Crockford base32 characters. Routes answer
 * 404 for anything else before it reaches a query, so control bytes never meet the database.
 */
export function isWellFormedId(kind: keyof typeof ID_PREFIX, value: string): boolean {
  const prefix = ID_PREFIX[kind];
  return value.startsWith(prefix) && ULID_BODY.test(value.slice(prefix.length));
}
