import { checkMailbox } from '../../emails/mailbox.ts';
import { MAX_PROPERTY_STRING } from '../schemas.ts';
import type { ImportPlan } from './options.ts';

/** A CSV record checked against the plan: the contact's fields, or why the row fails. */
export type CheckedRow =
  | { ok: true; key: string; email: string; firstName: string | null; lastName: string | null; unsubscribed: boolean | null; properties: Record<string, string | number> }
  | { ok: false; reason: string };

const YES = new Set(['true', 'yes', 'y', '1']);
const NO = new Set(['false', 'no', 'n', '0']);
const NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;
/** As the contacts API takes them. */
const MAX_NAME = 200;

const shown = (value: string) => JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);

function cell(record: string[], index: number | undefined): string | undefined {
  if (index === undefined) return undefined;
  const value = record[index]?.trim();
  return value === '' ? undefined : value;
}

/**
 * One row. The address must be a bare RFC 5322 addr-spec, checked as sends check theirs; an
 * empty cell leaves the field alone (null); property values must fit their declared type.
 */
export function checkRow(record: string[], plan: ImportPlan): CheckedRow {
  const email = cell(record, plan.email);
  if (email === undefined) return { ok: false, reason: 'email is empty' };
  if (/[<>]/.test(email) || !checkMailbox(email)) return { ok: false, reason: `email ${shown(email)} is not a valid address` };
  const firstName = cell(record, plan.first_name) ?? null;
  const lastName = cell(record, plan.last_name) ?? null;
  if ((firstName?.length ?? 0) > MAX_NAME || (lastName?.length ?? 0) > MAX_NAME) return { ok: false, reason: `a name is longer than ${MAX_NAME} characters` };
  const flag = cell(record, plan.unsubscribed)?.toLowerCase();
  let unsubscribed: boolean | null = null;
  if (flag !== undefined) {
    if (YES.has(flag)) unsubscribed = true;
    else if (NO.has(flag)) unsubscribed = false;
    else return { ok: false, reason: `unsubscribed ${shown(flag)} is not true or false` };
  }
  const properties: Record<string, string | number> = {};
  for (const p of plan.properties) {
    const value = cell(record, p.index);
    if (value === undefined) continue;
    if (p.type === 'number') {
      const n = Number(value);
      if (!NUMBER.test(value) || !Number.isFinite(n)) return { ok: false, reason: `properties.${p.key} ${shown(value)} is not a number` };
      properties[p.key] = n;
    } else {
      if (value.length > MAX_PROPERTY_STRING) return { ok: false, reason: `properties.${p.key} is longer than ${MAX_PROPERTY_STRING} characters` };
      properties[p.key] = value;
    }
  }
  return { ok: true, key: email.toLowerCase(), email, firstName, lastName, unsubscribed, properties };
}
