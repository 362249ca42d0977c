import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { caughtMail, seedSegment } from './fixtures.ts';

const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test' } });
await startTestWorker(ctx.config, ctx.sql);

type Json = Record<string, any>;
const call = async (key: string, path: string, method: string, body?: unknown) => {
  const res = await ctx.call(key, path, { method, ...(body === undefined ? {} : { body }) });
  return { status: res.status, body: (res.status === 204 ? {} : await res.json()) as Json };
};

/**
 * A published template whose parts read a variable, and carry Resend's per-contact placeholders
 * as Handlebars' escaped mustaches (`\{{{…}}}` renders as `{{{…}}}`), with no unsubscribe link.
 */
async function publishedTemplate(key: string, alias: string) {
  const created = await call(key, '/v1/templates', 'POST', {
    name: 'Newsletter', alias, from: 'News <news@example.test>', subject: 'News: {{headline}}',
    html: '<p>Hello \\{{{contact.first_name|there}}}, {{headline}}</p>',
    text: '{{headline}} for \\{{{EMAIL}}}',
    variables: [{ key: 'headline', type: 'string', fallback_value: null }],
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.equal((await call(key, `/v1/templates/${created.body.id}/publish`, 'POST')).status, 200);
  return created.body.id as string;
}

test('a published template is a broadcast\'s content: rendered with its variables, then personalised per contact with the footer', { timeout: 120_000 }, async () => {
  const { projectId, key } = await ctx.tenant('bc-template');
  const templateId = await publishedTemplate(key, 'newsletter');
  const { segmentId, email } = await seedSegment(ctx.sql, projectId, 4);

  const created = await call(key, '/v1/broadcasts', 'POST', { segment_id: segmentId, template: { id: 'newsletter', variables: { headline: 'Spring & more' } } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const b = created.body;
  assert.deepEqual(b.template, { id: templateId, version: 1 });
  assert.equal(b.from, 'News <news@example.test>', 'from the template');
  assert.equal(b.subject, 'News: Spring & more');
  assert.equal(b.html, '<p>Hello {{{contact.first_name|there}}}, Spring &amp; more</p>');

  // A later version of the template does not change a broadcast already made from it.
  assert.equal((await call(key, `/v1/templates/${templateId}`, 'PATCH', { subject: 'Changed {{headline}}' })).status, 200);
  assert.equal((await call(key, `/v1/templates/${templateId}/publish`, 'POST')).status, 200);

  const copy = await call(key, `/v1/broadcasts/${b.id}/duplicate`, 'POST');
  assert.equal(copy.status, 201);
  assert.deepEqual(copy.body.template, { id: templateId, version: 1 }, 'the duplicate names the same template version');
  assert.equal(copy.body.html, b.html);

  assert.equal((await call(key, `/v1/broadcasts/${b.id}/send`, 'POST', {})).status, 200);
  await waitFor('the broadcast to be sent', async () => (await call(key, `/v1/broadcasts/${b.id}`, 'GET')).body.status === 'sent', 90_000, 200);
  const mail = await caughtMail(ctx.sql, projectId);
  assert.equal(mail.length, 4);
  const named = mail.find((m) => m.to === email(1))!; // contact 2: even, so named
  const unnamed = mail.find((m) => m.to === email(0))!;
  assert.equal(named.subject, 'News: Spring & more');
  assert.match(named.html!, /<p>Hello Name2, Spring &amp; more<\/p>/);
  assert.match(unnamed.html!, /<p>Hello there, /, 'the placeholder\'s fallback');
  assert.match(named.text!, /^Spring & more for c2@example\.test/);
  // No unsubscribe placeholder in the template: Mailroom adds the footer to both parts, and the headers.
  const link = /^List-Unsubscribe: <(https:\/\/mail\.example\.test\/unsubscribe\/[^>]+)>/mi.exec(named.raw.replace(/\r\n[ \t]+/g, ' '))?.[1];
  assert.ok(link, 'one-click header');
  assert.ok(named.html!.includes(`href="${link}"`), 'html footer');
  assert.ok(named.text!.includes(`Unsubscribe: ${link}`), 'text footer');
  const [stored] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where broadcast_id = ${b.id} and project_id = ${projectId} and subject = 'News: Spring & more'`;
  assert.equal(stored.n, 4);
});

test('a template given on update renders again; inline html afterwards replaces it', async () => {
  const { projectId, key } = await ctx.tenant('bc-template-update');
  await publishedTemplate(key, 'monthly');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 1);
  const draft = (await call(key, '/v1/broadcasts', 'POST', { segment_id: segmentId, from: 'a@example.test', subject: 'Mine', text: 'inline' })).body;
  assert.equal(draft.template, null);
  const templated = await call(key, `/v1/broadcasts/${draft.id}`, 'PATCH', { template: { id: 'monthly', variables: { headline: 'June' } } });
  assert.equal(templated.status, 200, JSON.stringify(templated.body));
  assert.equal(templated.body.subject, 'News: June', 'the template\'s subject over the stored one');
  assert.equal(templated.body.from, 'News <news@example.test>');
  assert.equal(templated.body.text, 'June for {{{EMAIL}}}');
  assert.ok(templated.body.template);
  const overridden = await call(key, `/v1/broadcasts/${draft.id}`, 'PATCH', { subject: 'Own subject', template: { id: 'monthly', variables: { headline: 'July' } } });
  assert.equal(overridden.body.subject, 'Own subject', 'a subject given beside the template overrides it');
  const inline = await call(key, `/v1/broadcasts/${draft.id}`, 'PATCH', { html: '<p>by hand</p>', text: null });
  assert.equal(inline.status, 200);
  assert.equal(inline.body.template, null);
  assert.equal(inline.body.html, '<p>by hand</p>');
});

test('a broadcast\'s template must be the project\'s, published, and given every variable: 422 naming the field', async () => {
  const { projectId, key } = await ctx.tenant('bc-template-errors');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 1);
  await publishedTemplate(key, 'weekly');
  const draftOnly = await call(key, '/v1/templates', 'POST', { name: 'never published', html: '<p>x</p>', subject: 's', from: 'a@example.test' });
  const other = await ctx.tenant('bc-template-other');
  await publishedTemplate(other.key, 'theirs');

  const expect422 = async (body: unknown, loc: (string | number)[], type: string) => {
    const res = await call(key, '/v1/broadcasts', 'POST', { segment_id: segmentId, ...(body as object) });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.ok(res.body.detail.some((d: Json) => JSON.stringify(d.loc) === JSON.stringify(loc) && d.type === type), JSON.stringify(res.body.detail));
  };
  await expect422({ template: { id: 'nothing-here' } }, ['body', 'template', 'id'], 'template_not_found');
  await expect422({ template: { id: 'theirs', variables: { headline: 'x' } } }, ['body', 'template', 'id'], 'template_not_found');
  await expect422({ template: { id: draftOnly.body.id } }, ['body', 'template', 'id'], 'template_not_published');
  await expect422({ template: { id: 'weekly' } }, ['body', 'template', 'variables', 'headline'], 'missing');
  await expect422({ template: { id: 'weekly', variables: { headline: 3 } } }, ['body', 'template', 'variables', 'headline'], 'string_type');
  await expect422({ template: { id: 'weekly', variables: { headline: 'x' } }, html: '<p>also</p>' }, ['body', 'html'], 'template_conflict');
  await expect422({ from: 'a@example.test', text: 'no subject' }, ['body', 'subject'], 'missing');
  const [made] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from broadcasts where project_id = ${projectId}`;
  assert.equal(made.n, 0, 'nothing stored');
});
