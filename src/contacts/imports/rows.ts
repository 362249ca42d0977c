import { checkMailbox } from '../../emails/mailbox.ts';
import { MAX_PROPERTY_STRING } from '../schemas.ts';
import type { ImportPlan } from './options.ts';

/**
 * A checked row's values, in the order the batch's columns take them: email, first_name,
 * last_name, unsubscribed (`t`, `f`), then the plan's properties in order (a number in its
 * JavaScript spelling). An empty string leaves the field alone: a cell is never empty once checked.
 */
export type RowValues = string[];

/** The values before the properties. */
export const FIXED_COLUMNS = 4;

const YES = new Set(['true', 'yes', 'y', '1']);
const NO = new Set(['false', 'no', 'n', '0']);
const NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;
/** As the contacts API takes them. */
const MAX_NAME = 200;

const shown = (value: string) => JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);

function cell(record: string[], index: number | undefined): string {
  if (index === undefined) return '';
  const value = record[index];
  return value === undefined ? '' : value.trim();
}

/**
 * One row, written into `values` (reused from row to row: a million rows allocate no object of
 * their own). Answers why the row fails, or undefined. The address must be a bare RFC 5322
 * addr-spec, checked as sends check theirs; an empty cell leaves the field alone; property values
 * must fit their declared type.
 */
export function checkRow(record: string[], plan: ImportPlan, values: RowValues): string | undefined {
  const email = cell(record, plan.email);
  if (email === '') return 'email is empty';
  if (/[<>]/.test(email) || !checkMailbox(email)) return `email ${shown(email)} is not a valid address`;
  const firstName = cell(record, plan.first_name);
  const lastName = cell(record, plan.last_name);
  if (firstName.length > MAX_NAME || lastName.length > MAX_NAME) return `a name is longer than ${MAX_NAME} characters`;
  const flag = cell(record, plan.unsubscribed).toLowerCase();
  let unsubscribed = '';
  if (flag !== '') {
    if (YES.has(flag)) unsubscribed = 't';
    else if (NO.has(flag)) unsubscribed = 'f';
    else return `unsubscribed ${shown(flag)} is not true or false`;
  }
  values[0] = email;
  values[1] = firstName;
  values[2] = lastName;
  values[3] = unsubscribed;
  for (let i = 0; i < plan.properties.length; i++) {
    const p = plan.properties[i]!;
    let value = cell(record, p.index);
    if (value !== '') {
      if (p.type === 'number') {
        const n = Number(value);
        if (!NUMBER.test(value) || !Number.isFinite(n)) return `properties.${p.key} ${shown(value)} is not a number`;
        // As JSON would write it, so PostgreSQL stores the number the contacts API would.
        value = String(n);
      } else if (value.length > MAX_PROPERTY_STRING) {
        return `properties.${p.key} is longer than ${MAX_PROPERTY_STRING} characters`;
      }
    }
    values[FIXED_COLUMNS + i] = value;
  }
  return undefined;
}
