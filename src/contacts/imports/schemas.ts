import { z } from '@hono/zod-openapi';
import type { ImportRow } from './queries.ts';

const Counts = z.object({
  total: z.number().int().openapi({ description: 'Rows read so far (the header not included); the file\'s row count once completed.' }),
  created: z.number().int(),
  updated: z.number().int(),
  skipped: z.number().int().openapi({ description: 'Rows of an address already a contact, with `on_conflict: skip`.' }),
  failed: z.number().int().openapi({ description: 'Rows refused; the first 100 are in `errors`.' }),
});

export const ImportResponse = z
  .object({
    id: z.string().openapi({ example: 'cimp_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z' }),
    status: z.enum(['queued', 'in_progress', 'completed', 'failed']),
    on_conflict: z.enum(['upsert', 'skip']),
    counts: Counts,
    errors: z.array(z.object({ line: z.number().int(), reason: z.string() })).openapi({ description: 'The first 100 failed rows; the header is line 1.' }),
    progress: z.object({ bytes_done: z.number().int(), bytes_total: z.number().int() }).openapi({ description: 'How far into the file the import is.' }),
    failure_reason: z.string().nullable().openapi({ description: 'Why a `failed` import stopped.' }),
    created_at: z.string().datetime(),
    started_at: z.string().datetime().nullable(),
    completed_at: z.string().datetime().nullable(),
  })
  .openapi('ContactImport');

export const ImportList = z.object({ data: z.array(ImportResponse), has_more: z.boolean() }).openapi('ContactImportList');

export const counts = (r: ImportRow) => ({ total: r.total, created: r.created, updated: r.updated, skipped: r.skipped, failed: r.failed });

export function toImportResponse(r: ImportRow): z.infer<typeof ImportResponse> {
  return {
    id: r.id,
    status: r.status,
    on_conflict: r.onConflict,
    counts: counts(r),
    errors: r.errors,
    progress: { bytes_done: r.bytesDone, bytes_total: r.bytesTotal },
    failure_reason: r.failureReason,
    created_at: r.createdAt.toISOString(),
    started_at: r.startedAt?.toISOString() ?? null,
    completed_at: r.completedAt?.toISOString() ?? null,
  };
}
