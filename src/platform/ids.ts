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
