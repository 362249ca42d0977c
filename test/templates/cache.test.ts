import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { templateCompiles } from '../../src/templates/service.ts';
import { templateThread } from '../../src/templates/threads.ts';

// §18.14: compiled templates are cached up to TEMPLATE_CACHE_MB, by bytes, not by count; a draft
// is compiled once per version, not per preview.

const ctx = await createTestContext({ env: { TEMPLATE_CACHE_MB: '1' } });
const { key } = await ctx.tenant();
const call = async (path: string, body?: unknown, method = 'POST') => {
  const res = await ctx.call(key, path, { method, body });
  return { status: res.status, body: await res.json() as { id?: string } };
};

test('previews of a draft compile it once per version; an edit compiles the new text once', async () => {
  const t = (await call('/v1/templates', { name: 'Draft', html: '<p>{{n}}</p>', variables: [{ key: 'n', type: 'string' }] })).body;
  const before = await templateCompiles();
  for (let i = 0; i < 5; i++) assert.equal((await call(`/v1/templates/${t.id}/render`, { variables: { n: String(i) } })).status, 200);
  assert.equal(await templateCompiles(), before, 'previews compile nothing: create compiled the draft');
  assert.equal((await call(`/v1/templates/${t.id}`, { html: '<p>{{n}}!</p>' }, 'PATCH')).status, 200);
  const edited = await templateCompiles();
  assert.equal(edited, before + 1, 'the edit compiled its new text once');
  for (let i = 0; i < 5; i++) assert.equal((await call(`/v1/templates/${t.id}/render`, { variables: { n: String(i) } })).status, 200);
  assert.equal(await templateCompiles(), edited);
});

test('the compiled cache holds at most TEMPLATE_CACHE_MB of text and code, whatever the count', async () => {
  // Each part is about 300 KB of text, and more of generated code: three do not fit in 1 MB.
  for (let i = 0; i < 3; i++) {
    const html = `<p>${String(i).repeat(300 * 1024)}{{n}}</p>`;
    assert.equal((await call('/v1/templates', { name: `Big ${i}`, html, variables: [{ key: 'n', type: 'string' }] })).status, 201);
  }
  const stats = await templateThread().stats();
  assert.ok(stats.bytes <= 1024 * 1024, `${stats.bytes} bytes cached`);
  assert.ok(stats.entries < 4, `${stats.entries} entries`);
});

test('a small template renders on the event loop after its first render; output past the inline bounds comes whole from the thread', async () => {
  const t = (await call('/v1/templates', { name: 'Small', subject: 'Hi {{n}}', html: '<p>{{n}}</p>', variables: [{ key: 'n', type: 'string' }] })).body;
  const render = async (n: string) => {
    const res = await ctx.call(key, `/v1/templates/${t.id}/render`, { method: 'POST', body: { variables: { n } } });
    assert.equal(res.status, 200);
    return (await res.json()) as { subject: string; html: string };
  };
  const first = templateThread().threadRenders;
  assert.deepEqual(await render('a & b'), { ...(await render('a & b')), html: '<p>a &amp; b</p>' });
  assert.equal((await render('<c>')).html, '<p>&lt;c&gt;</p>');
  assert.equal(templateThread().threadRenders, first + 1, 'only the first render went to the thread');
  // 60,000 `&` escape to 300 KB: past the event loop's bound, so the thread renders it whole.
  const big = await render('&'.repeat(60_000));
  assert.equal(big.html, `<p>${'&amp;'.repeat(60_000)}</p>`);
  assert.equal(templateThread().threadRenders, first + 2);
});
