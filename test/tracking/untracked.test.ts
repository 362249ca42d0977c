import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { settled } from '../sending/fixtures.ts';

// Tracking never fails a send (§15.2): a message that fits the size limit as written, but not
// once its links are rewritten, goes out as written.
const LIMIT = 4096;
const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test', EMAIL_MAX_MESSAGE_BYTES: String(LIMIT) } });
await startTestWorker(ctx.config, ctx.sql);
const { projectId, key } = await ctx.tenant();

test('a message over EMAIL_MAX_MESSAGE_BYTES once tracked is sent untracked, and sent', async () => {
  const html = Array.from({ length: 45 }, (_, i) => `<a href="https://a.example/${i}">${i}</a>`).join('\n');
  const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'a@shop.example', to: 'b@example.net', subject: 's', html, text: 'x', track_clicks: true, track_opens: true } });
  assert.equal(res.status, 201, await res.clone().text());
  const { id } = (await res.json()) as { id: string };
  const state = await settled(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent', state.lastError ?? '');
  const [caught] = await ctx.sql<[{ html: string; sizeBytes: number }]>`select html, size_bytes from sink_messages where project_id = ${projectId} and email_id = ${id}`;
  assert.equal(caught.html.trimEnd(), html, 'the HTML as written');
  assert.ok(caught.sizeBytes <= LIMIT);
});
