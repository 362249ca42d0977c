import { test } from 'node:test';
import assert from 'node:assert/strict';
import { simpleParser } from 'mailparser';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';

const ctx = await createTestContext();
const { key } = await ctx.tenant();
const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

test('an attachment with content_id goes inline with that Content-ID, so cid: images work', async () => {
  const worker = await startTestWorker(ctx.config, ctx.sql);
  const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: {
    from: 'app@acme.test', to: 'ann@example.net', subject: 'Logo', html: '<p><img src="cid:logo@acme"></p>',
    attachments: [
      { filename: 'logo.png', content: png.toString('base64'), content_type: 'image/png', content_id: 'logo@acme' },
      { filename: 'terms.txt', content: Buffer.from('terms').toString('base64') },
    ],
  } });
  assert.equal(res.status, 201);
  const { id } = (await res.json()) as { id: string };
  const [caught] = await waitFor('the sink to catch it', async () => {
    const rows = await ctx.sql<{ raw: Buffer }[]>`select raw from sink_messages where email_id = ${id}`;
    return rows.length === 1 && rows;
  });
  await worker.stop();
  const parsed = await simpleParser(caught!.raw);
  const logo = parsed.attachments.find((a) => a.filename === 'logo.png')!;
  assert.equal(logo.contentId, '<logo@acme>');
  assert.equal(logo.contentDisposition, 'inline');
  assert.ok(logo.related, 'inside multipart/related beside the HTML');
  assert.deepEqual(logo.content, png);
  const terms = parsed.attachments.find((a) => a.filename === 'terms.txt')!;
  assert.equal(terms.contentDisposition, 'attachment');
  assert.ok(!terms.related);
});

test('a content_id with spaces, angle brackets or line breaks is refused with 422', async () => {
  for (const contentId of ['has space', '<logo>', 'a\r\nb', '', 'x'.repeat(256)]) {
    const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: {
      from: 'app@acme.test', to: 'ann@example.net', subject: 'x', text: 'x',
      attachments: [{ filename: 'a.png', content: 'AAAA', content_id: contentId }],
    } });
    assert.equal(res.status, 422, JSON.stringify(contentId));
    const { detail } = (await res.json()) as { detail: { loc: unknown[] }[] };
    assert.deepEqual(detail[0]!.loc, ['body', 'attachments', 0, 'content_id']);
  }
});
