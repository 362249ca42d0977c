import { randomFillSync } from 'node:crypto';
import { encodeTime, monotonicFactory } from 'ulid';

/**
 * ulid's own source asks the CSPRNG once per character, sixteen calls for each new millisecond.
 * This one hands out bytes of a buffer refilled from it a page at a time. A byte over 256 times
 * 32 symbols is exactly uniform, since 256 is a multiple of 32.
 */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;
function pooledRandom(): number {
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  return pool[poolAt++]! / 256;
}

const ulid = monotonicFactory(pooledRandom);

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
  /** A team member; the first owner's id kept its `usr_` when owners became members. */
  member: 'usr_',
  invitation: 'inv_',
  template: 'tmpl_',
  templateVersion: 'tmplv_',
  audit: 'aud_',
  received: 'rcv_',
  receivedAttachment: 'att_',
  contact: 'contact_',
  contactProperty: 'cprop_',
  segment: 'seg_',
  topic: 'topic_',
  contactImport: 'cimp_',
  broadcast: 'bc_',
} as const;

/**
 * The database's clock minus this host's, in ms, as id-clock.ts last measured it. An id's time is
 * its day partition (§17.1), and the database's day is the one that counts (§22.12): a host whose
 * clock is days off still files its mail under the database's today.
 */
let clockOffsetMs = 0;

export function setIdClockOffset(ms: number) {
  clockOffsetMs = ms;
}

/** Now by the database's clock, as ids are made from it (Date.now() value). */
export function idClockNow(): number {
  return Date.now() + clockOffsetMs;
}

/** Prefix + a 26-character ULID: lexical order is creation order, which cursor paging uses. */
export function newId(kind: keyof typeof ID_PREFIX): string {
  return ID_PREFIX[kind] + ulid(idClockNow());
}

/**
 * The smallest id of `kind` made at or after `ms` (a Date.now() value), as the SQL function
 * mailroom_id_floor gives: a time range is an id range, which the day partitions are split by.
 */
export function idFloor(kind: keyof typeof ID_PREFIX, ms: number): string {
  return ID_PREFIX[kind] + encodeTime(Math.max(0, Math.floor(ms)), 10) + '0'.repeat(16);
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
