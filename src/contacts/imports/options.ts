import { z } from 'zod';
import { ValidationError, type ValidationDetail } from '../../http/errors.ts';
import type { Sql, TxSql } from '../../platform/db.ts';
import { declaredProperties, existingSegments, existingTopics } from './queries.ts';

/**
 * The multipart fields of an import besides the file, as the Resend SDK sends them: `column_map`,
 * `segments` and `topics` are JSON strings, `on_conflict` a bare word. Checked against the file's
 * header and the project's segments, topics and declared properties before anything is queued.
 */
export type RawFields = { column_map?: string; segments?: string; topics?: string; on_conflict?: string };

export const CONTACT_FIELDS = ['email', 'first_name', 'last_name', 'unsubscribed'] as const;
type ContactField = typeof CONTACT_FIELDS[number];

/** Which column (by index in the header) feeds which field; the worker reads rows by it. */
export type ImportPlan = {
  email: number;
  first_name?: number;
  last_name?: number;
  unsubscribed?: number;
  properties: Array<{ key: string; index: number; type: 'string' | 'number' }>;
};

export type ImportOptions = {
  plan: ImportPlan;
  onConflict: 'upsert' | 'skip';
  segmentIds: string[];
  topics: Array<{ id: string; subscription: 'opt_in' | 'opt_out' }>;
};

const Column = z.string().trim().min(1).max(1000);
// Resend's shape: field → the CSV column that feeds it; a property as `{column, type?}` or a bare column name.
const ColumnMap = z.strictObject({
  email: Column.optional(),
  first_name: Column.optional(),
  last_name: Column.optional(),
  unsubscribed: Column.optional(),
  properties: z.record(z.string(), z.union([Column, z.object({ column: Column, type: z.enum(['string', 'number', 'boolean']).optional() })])).optional(),
});
const Segments = z.array(z.union([z.string().min(1).max(100), z.object({ id: z.string().min(1).max(100) })])).max(100);
const Topics = z.array(z.object({ id: z.string().min(1).max(100), subscription: z.enum(['opt_in', 'opt_out']) })).max(100);
const OnConflict = z.enum(['upsert', 'skip']);

function parsed<T extends z.ZodTypeAny>(field: keyof RawFields, raw: string | undefined, schema: T, json = true): z.infer<T> | undefined {
  if (raw === undefined || raw === '') return undefined;
  let value: unknown = raw;
  if (json) {
    try {
      value = JSON.parse(raw);
    } catch {
      throw new ValidationError([{ loc: ['body', field], msg: `${field} must be a JSON string`, type: 'json_invalid' }]);
    }
  }
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new ValidationError(result.error.issues.map((i) => ({ loc: ['body', field, ...i.path.map((p) => (typeof p === 'symbol' ? String(p) : p))], msg: i.message, type: 'value_error' })));
  }
  return result.data;
}

/** The header's index of `column`: exactly as written first, else ignoring case and spaces around it. */
function columnIndex(header: string[], column: string): number | undefined {
  const exact = header.indexOf(column);
  if (exact >= 0) return exact;
  const folded = column.trim().toLowerCase();
  const i = header.findIndex((h) => h.trim().toLowerCase() === folded);
  return i >= 0 ? i : undefined;
}

/**
 * The fields checked and resolved against the header. Mapped columns must be in the header;
 * fields left out of `column_map` take a column named like them (`email`, `first_name`, …,
 * `properties.<key>`); every property must be declared, with its declared type.
 */
export async function resolveOptions(sql: Sql | TxSql, projectId: string, fields: RawFields, header: string[]): Promise<ImportOptions> {
  const map = parsed('column_map', fields.column_map, ColumnMap) ?? {};
  const segments = parsed('segments', fields.segments, Segments) ?? [];
  const topics = parsed('topics', fields.topics, Topics) ?? [];
  const onConflict = parsed('on_conflict', fields.on_conflict, OnConflict, false) ?? 'upsert';
  const problems: ValidationDetail[] = [];

  const plan: Partial<Record<ContactField, number>> = {};
  for (const field of CONTACT_FIELDS) {
    const column = map[field];
    const index = columnIndex(header, column ?? field);
    if (index !== undefined) plan[field] = index;
    else if (column !== undefined) problems.push({ loc: ['body', 'column_map', field], msg: `column "${column}" is not in the file's header`, type: 'value_error' });
  }
  if (plan.email === undefined && map.email === undefined) {
    problems.push({ loc: ['body', 'column_map', 'email'], msg: 'the file has no email column; name it in column_map.email', type: 'missing' });
  }

  const declared = await declaredProperties(sql, projectId);
  const properties: ImportPlan['properties'] = [];
  const mapped = new Set<string>();
  for (const [key, spec] of Object.entries(map.properties ?? {})) {
    const column = typeof spec === 'string' ? spec : spec.column;
    const type = declared.get(key);
    const index = columnIndex(header, column);
    mapped.add(key);
    if (!type) problems.push({ loc: ['body', 'column_map', 'properties', key], msg: `"${key}" is not a declared contact property`, type: 'value_error' });
    else if (typeof spec !== 'string' && spec.type && spec.type !== type) problems.push({ loc: ['body', 'column_map', 'properties', key, 'type'], msg: `"${key}" is declared as ${type}`, type: 'value_error' });
    else if (index === undefined) problems.push({ loc: ['body', 'column_map', 'properties', key], msg: `column "${column}" is not in the file's header`, type: 'value_error' });
    else properties.push({ key, index, type });
  }
  header.forEach((name, index) => {
    const key = /^properties\.(.+)$/.exec(name.trim())?.[1];
    if (key === undefined || mapped.has(key)) return;
    const type = declared.get(key);
    if (!type) problems.push({ loc: ['body', 'file'], msg: `column "${name}" names "${key}", which is not a declared contact property`, type: 'value_error' });
    else properties.push({ key, index, type });
  });

  const segmentIds = [...new Set(segments.map((s) => (typeof s === 'string' ? s : s.id)))];
  const knownSegments = await existingSegments(sql, projectId, segmentIds);
  segments.forEach((s, i) => {
    const id = typeof s === 'string' ? s : s.id;
    if (!knownSegments.has(id)) problems.push({ loc: ['body', 'segments', i], msg: `segment ${id} does not exist in this project`, type: 'value_error' });
  });
  const knownTopics = await existingTopics(sql, projectId, topics.map((t) => t.id));
  topics.forEach((t, i) => {
    if (!knownTopics.has(t.id)) problems.push({ loc: ['body', 'topics', i, 'id'], msg: `topic ${t.id} does not exist in this project`, type: 'value_error' });
  });
  if (problems.length) throw new ValidationError(problems);
  const byTopic = new Map(topics.map((t) => [t.id, t.subscription] as const));
  return {
    plan: { ...plan, email: plan.email!, properties },
    onConflict,
    segmentIds,
    topics: [...byTopic].map(([id, subscription]) => ({ id, subscription })),
  };
}
