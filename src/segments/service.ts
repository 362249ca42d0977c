import { z } from '@hono/zod-openapi';
import type { Sql } from '../platform/db.ts';
import { newId } from '../platform/ids.ts';
import { text } from '../emails/validate.ts';
import { recordAudit } from '../audit/record.ts';
import { parse, requireSegment } from '../contacts/service.ts';
import * as q from './queries.ts';

/** Segments (§23.1): named groups of contacts; a broadcast goes to one. */

export const SegmentRequest = z.object({ name: text().trim().min(1).max(200).openapi({ example: 'Customers' }) }).openapi('SegmentRequest');

export const SegmentResponse = z.object({
  object: z.literal('segment'),
  id: z.string().openapi({ example: 'seg_01JD5Q2V3N9C8X7B6A5Z4Y3W2V' }),
  name: z.string(),
  created_at: z.string().openapi({ format: 'date-time' }),
}).openapi('Segment');
export const SegmentList = z.object({ data: z.array(SegmentResponse), has_more: z.boolean() }).openapi('SegmentList');

export const toSegmentResponse = (s: q.SegmentRow): z.infer<typeof SegmentResponse> =>
  ({ object: 'segment', id: s.id, name: s.name, created_at: s.createdAt.toISOString() });

export async function createSegment(sql: Sql, projectId: string, body: unknown) {
  const { name } = parse(SegmentRequest, body);
  return sql.begin(async (tx) => {
    const segment = await q.insertSegment(tx, { id: newId('segment'), projectId, name });
    await recordAudit(tx, { action: 'segment.created', projectId, target: { type: 'segment', id: segment.id }, changes: { name } });
    return segment;
  });
}

export async function renameSegment(sql: Sql, projectId: string, id: string, body: unknown) {
  const { name } = parse(SegmentRequest, body);
  await requireSegment(sql, projectId, id);
  return sql.begin(async (tx) => {
    const segment = await q.renameSegment(tx, projectId, id, name);
    if (!segment) return requireSegment(tx, projectId, id);
    await recordAudit(tx, { action: 'segment.updated', projectId, target: { type: 'segment', id }, changes: { name } });
    return segment;
  });
}

/** The contacts stay; they are only no longer in it (no contact.* event per member). */
export async function deleteSegment(sql: Sql, projectId: string, id: string) {
  const segment = await requireSegment(sql, projectId, id);
  await sql.begin(async (tx) => {
    if (!await q.deleteSegment(tx, projectId, id)) return;
    await recordAudit(tx, { action: 'segment.deleted', projectId, target: { type: 'segment', id }, changes: { name: segment.name } });
  });
  return segment;
}
