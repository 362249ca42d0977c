import type { TestContext } from '../helpers/app.ts';
import type { Sql } from '../../src/platform/db.ts';
import { newId } from '../../src/platform/ids.ts';
import { waitFor } from '../helpers/wait.ts';

/** Declared properties, a segment and a topic, written as the contacts routes would. */
export async function seedProject(sql: Sql, projectId: string) {
  const segmentId = newId('segment');
  const topicId = newId('topic');
  await sql`insert into contact_properties (id, project_id, key, type) values
    (${newId('contactProperty')}, ${projectId}, 'plan', 'string'), (${newId('contactProperty')}, ${projectId}, 'age', 'number')`;
  await sql`insert into segments (id, project_id, name) values (${segmentId}, ${projectId}, 'Newsletter')`;
  await sql`insert into topics (id, project_id, name, default_subscription) values (${topicId}, ${projectId}, 'Product news', 'opt_in')`;
  return { segmentId, topicId };
}

/** A contact already there before an import. */
export async function existingContact(sql: Sql, projectId: string, email: string, fields: { firstName?: string; properties?: Record<string, unknown> } = {}) {
  const id = newId('contact');
  await sql`insert into contacts (id, project_id, email, first_name, properties) values (${id}, ${projectId}, ${email}, ${fields.firstName ?? null}, ${sql.json((fields.properties ?? {}) as never)})`;
  return id;
}

/** `POST /v1/contacts/imports` with a multipart body, as a browser or the SDK sends it. */
export function upload(ctx: TestContext, key: string, csv: string | Uint8Array, fields: Record<string, string> = {}, path = '/v1/contacts/imports') {
  const form = new FormData();
  form.append('file', new Blob([csv as BlobPart], { type: 'text/csv' }), 'contacts.csv');
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  return ctx.app.request(path, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
}

export type ImportBody = {
  id: string; status: string; on_conflict: string;
  counts: { total: number; created: number; updated: number; skipped: number; failed: number };
  errors: Array<{ line: number; reason: string }>;
  progress: { bytes_done: number; bytes_total: number };
  failure_reason: string | null; created_at: string; started_at: string | null; completed_at: string | null;
};

export async function getImportBody(ctx: TestContext, key: string, id: string): Promise<ImportBody> {
  const res = await ctx.call(key, `/v1/contacts/imports/${id}`);
  if (res.status !== 200) throw new Error(`GET import: ${res.status} ${await res.text()}`);
  return res.json() as Promise<ImportBody>;
}

/** Waits on the row (the API's rate limit is not the subject here), then reads the import through the API. */
export async function waitFinished(ctx: TestContext, key: string, id: string, timeoutMs = 60_000) {
  await waitFor(`import ${id} to finish`, async () => {
    const [row] = await ctx.sql<[{ status: string }?]>`select status from contact_imports where id = ${id}`;
    return row?.status === 'completed' || row?.status === 'failed';
  }, timeoutMs, 50);
  return getImportBody(ctx, key, id);
}

/** `rows` generated rows of `name{i}@example.com`, with a header. */
export function generatedCsv(rows: number, prefix = 'person'): string {
  const lines = ['email,first_name,last_name,properties.plan'];
  for (let i = 0; i < rows; i++) lines.push(`${prefix}${i}@example.com,First${i},Last${i},${i % 2 ? 'pro' : 'free'}`);
  return `${lines.join('\n')}\n`;
}
