import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { templateCompiles } from '../../src/templates/service.ts';

// A small message limit, so an {{#each}} that multiplies its output reaches it quickly.
const LIMIT = 200_000;
const ctx = await createTestContext({ env: { EMAIL_MAX_MESSAGE_BYTES: String(LIMIT) } });
const { key, projectId } = await ctx.tenant();

type Json = Record<string, any>;
const call = async (path: string, init: { method?: string; body?: unknown; key?: string } = {}) => {
  const res = await ctx.call(init.key ?? key, path, { method: init.method ?? (init.body === undefined ? 'GET' : 'POST'), body: init.body });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as Json };
};
const create = (body: Json) => call('/v1/templates', { body });
const send = (body: Json) => call('/v1/emails', { body: { from: 'App <app@example.com>', to: 'ann@example.net', ...body } });
const email = async (id: string) => (await call(`/v1/emails/${id}`)).body;

const welcome = {
  name: 'Welcome',
  alias: 'welcome',
  subject: 'Hi {{name}}',
  html: '<p>Hello {{name}}, you have {{count}} new {{#if count}}messages{{/if}}.</p>',
  text: 'Hello {{name}} ({{count}})',
  from: 'Acme <hello@acme.example>',
  variables: [{ key: 'name', type: 'string' }, { key: 'count', type: 'number', fallback_value: 0 }],
};

test('create answers a draft at version 1, readable by id and by alias, listed with paging', async () => {
  const made = await create(welcome);
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const t = made.body;
  assert.match(t.id, /^tmpl_[0-9A-Z]{26}$/);
  assert.equal(t.status, 'draft');
  assert.equal(t.current_version, 1);
  assert.equal(t.has_unpublished_versions, false);
  assert.equal(t.published_at, null);
  assert.deepEqual(t.variables, [{ key: 'name', type: 'string', fallback_value: null }, { key: 'count', type: 'number', fallback_value: 0 }]);
  assert.deepEqual((await call(`/v1/templates/${t.id}`)).body, t);
  assert.deepEqual((await call('/v1/templates/welcome')).body, t);
  assert.equal((await call('/v1/templates/nope')).status, 404);
  assert.equal((await call('/v1/templates/tmpl_01ARZ3NDEKTSV4RRFFQ69G5FAV')).status, 404);

  const second = (await create({ name: 'Second', html: '<p>x</p>' })).body;
  const page = await call('/v1/templates?limit=1');
  assert.deepEqual(page.body.data.map((x: Json) => x.id), [second.id]);
  assert.equal(page.body.has_more, true);
  assert.equal(page.body.data[0].html, undefined, 'list items carry no bodies');
  const next = await call(`/v1/templates?limit=1&starting_after=${second.id}`);
  assert.deepEqual(next.body.data.map((x: Json) => x.id), [t.id]);
  assert.equal((await call('/v1/templates?starting_after=tmpl_01ARZ3NDEKTSV4RRFFQ69G5FAV')).status, 404);

  // Another project sees none of it.
  const other = await ctx.tenant('other');
  assert.equal((await call(`/v1/templates/${t.id}`, { key: other.key })).status, 404);
  assert.equal((await call('/v1/templates/welcome', { key: other.key })).status, 404);
  assert.equal((await call(`/v1/templates/${t.id}/publish`, { key: other.key, method: 'POST' })).status, 404);
});

test('a source that does not parse, or reads an undeclared name, answers 422 with the part, line and column or the name', async () => {
  const syntax = await create({ name: 'x', html: '<p>\n  {{#if name}}open</p>', variables: [{ key: 'name', type: 'string' }] });
  assert.equal(syntax.status, 422);
  assert.deepEqual(syntax.body.detail[0].loc, ['body', 'html']);
  assert.equal(syntax.body.detail[0].type, 'template_syntax');
  assert.equal(typeof syntax.body.detail[0].ctx.line, 'number');

  const unclosed = await create({ name: 'x', html: 'ok', subject: 'line one {{name' });
  assert.equal(unclosed.status, 422);
  assert.deepEqual(unclosed.body.detail[0].loc, ['body', 'subject']);
  assert.equal(unclosed.body.detail[0].ctx.line, 1);

  const undeclared = await create({ name: 'x', html: '<p>a</p>\n<p>{{first}} {{user.name}}</p>', variables: [{ key: 'first', type: 'string' }] });
  assert.equal(undeclared.status, 422);
  assert.deepEqual(undeclared.body.detail[0].loc, ['body', 'html']);
  assert.equal(undeclared.body.detail[0].type, 'template_variable_undeclared');
  assert.deepEqual(undeclared.body.detail[0].ctx, { line: 2, column: 16, name: 'user' });
  assert.match(undeclared.body.detail[0].msg, /user/);

  // Names inside {{#each}} and {{#with}} belong to the item, and block params are local.
  const scoped = await create({ name: 'x', html: '{{#each this as |v k|}}{{k}}={{v}} {{length}}{{../name}}{{/each}}{{#with name}}{{this}}{{/with}}{{@root.name}}', variables: [{ key: 'name', type: 'string' }] });
  assert.equal(scoped.status, 201, JSON.stringify(scoped.body));
  const rootUndeclared = await create({ name: 'x', html: '{{#each this}}{{@root.missing}}{{/each}}', variables: [{ key: 'a', type: 'string' }] });
  assert.equal(rootUndeclared.body.detail[0].ctx.name, 'missing');
  const ifKeepsContext = await create({ name: 'x', html: '{{#if a}}{{missing}}{{/if}}', variables: [{ key: 'a', type: 'string' }] });
  assert.equal(ifKeepsContext.body.detail[0].ctx.name, 'missing');

  for (const [html, type] of [
    ['{{> header}}', 'template_unsupported'],
    ['{{#> layout}}x{{/layout}}', 'template_unsupported'],
    ['{{shout a}}', 'template_helper_unknown'],
    ['{{#shout a}}x{{/shout}}', 'template_helper_unknown'],
    ['{{log a}}', 'template_helper_unknown'],
    ['{{#a}}x{{/a}}', 'template_helper_unknown'],
    ['{{constructor}}', 'template_variable_undeclared'],
    ['{{__proto__}}', 'template_variable_undeclared'],
  ] as const) {
    const res = await create({ name: 'x', html, variables: [{ key: 'a', type: 'string' }] });
    assert.equal(res.status, 422, html);
    assert.equal(res.body.detail[0].type, type, html);
  }
});

test('model rules: alias format and uniqueness, variable keys and fallbacks, required fields', async () => {
  for (const body of [
    { name: 'x', html: 'x', alias: 'Has Capitals' },
    { name: 'x', html: 'x', alias: 'a'.repeat(65) },
    { name: 'x', html: 'x', variables: [{ key: 'constructor', type: 'string' }] },
    { name: 'x', html: 'x', variables: [{ key: '1st', type: 'string' }] },
    { name: 'x', html: 'x', variables: [{ key: 'a', type: 'number', fallback_value: 'three' }] },
    { name: 'x', html: 'x', variables: [{ key: 'a', type: 'boolean' }] },
    { name: 'x', html: 'x', variables: [{ key: 'a', type: 'string' }, { key: 'a', type: 'string' }] },
    { name: 'x', html: 'x', from: 'not an address' },
    { name: '', html: 'x' },
    { name: 'x' },
  ]) {
    const res = await create(body);
    assert.equal(res.status, 422, JSON.stringify(body));
  }
  assert.equal((await create({ name: 'a', html: 'x', alias: 'shared-alias_1' })).status, 201);
  const taken = await create({ name: 'b', html: 'x', alias: 'shared-alias_1' });
  assert.equal(taken.status, 422);
  assert.deepEqual(taken.body.detail[0].loc, ['body', 'alias']);
  assert.equal(taken.body.detail[0].type, 'alias_taken');
  const other = await ctx.tenant('alias elsewhere');
  assert.equal((await call('/v1/templates', { key: other.key, body: { name: 'a', html: 'x', alias: 'shared-alias_1' } })).status, 201, 'aliases are per project');
});

test('publish semantics: sends use the published version; edits reach them only when published', async () => {
  const t = (await create({ ...welcome, alias: 'publish-flow' })).body;
  const never = await send({ template: { id: t.id, variables: { name: 'Ann' } } });
  assert.equal(never.status, 422);
  assert.deepEqual(never.body.detail[0].loc, ['body', 'template', 'id']);
  assert.equal(never.body.detail[0].type, 'template_not_published');

  const published = await call(`/v1/templates/${t.id}/publish`, { method: 'POST' });
  assert.equal(published.status, 200);
  assert.equal(published.body.status, 'published');
  assert.equal(published.body.has_unpublished_versions, false);
  assert.ok(published.body.published_at);

  const one = await call('/v1/emails', { body: { to: 'ann@example.net', template: { id: 'publish-flow', variables: { name: 'Ann', count: 3 } } } });
  assert.equal(one.status, 201, JSON.stringify(one.body));
  const first = await email(one.body.id);
  assert.equal(first.subject, 'Hi Ann');
  assert.equal(first.html, '<p>Hello Ann, you have 3 new messages.</p>');
  assert.equal(first.text, 'Hello Ann (3)');
  assert.equal(first.from, 'Acme <hello@acme.example>');
  assert.deepEqual(first.template, { id: t.id, version: 1 });

  const edited = await call(`/v1/templates/${t.id}`, { method: 'PATCH', body: { html: '<p>Welcome back, {{name}}.</p>' } });
  assert.equal(edited.status, 200, JSON.stringify(edited.body));
  assert.equal(edited.body.has_unpublished_versions, true);
  assert.equal(edited.body.current_version, 2);
  assert.equal(edited.body.status, 'published');
  const again = await call(`/v1/templates/${t.id}`, { method: 'PATCH', body: { subject: 'Welcome back' } });
  assert.equal(again.body.current_version, 2, 'one draft collects the edits');

  const two = await email((await send({ template: { id: t.id, variables: { name: 'Bob' } } })).body.id);
  assert.equal(two.html, '<p>Hello Bob, you have 0 new .</p>', 'the published version, with the fallback for count');
  assert.equal(two.subject, 'Hi Bob');
  assert.deepEqual(two.template, { id: t.id, version: 1 });

  const draft = await call(`/v1/templates/${t.id}/render`, { body: { variables: { name: 'Cy' } } });
  assert.deepEqual(draft.body, { subject: 'Welcome back', html: '<p>Welcome back, Cy.</p>', text: 'Hello Cy (0)' }, 'render shows the draft');
  const v1 = await call(`/v1/templates/${t.id}/render`, { body: { variables: { name: 'Cy' }, version: 1 } });
  assert.equal(v1.body.subject, 'Hi Cy');
  assert.equal((await call(`/v1/templates/${t.id}/render`, { body: { version: 9, variables: { name: 'x' } } })).status, 422);

  await call(`/v1/templates/${t.id}/publish`, { method: 'POST' });
  const three = await email((await send({ template: { id: t.id, variables: { name: 'Dee' } }, subject: 'Overridden', reply_to: 'help@acme.example' })).body.id);
  assert.equal(three.html, '<p>Welcome back, Dee.</p>');
  assert.equal(three.subject, 'Overridden', 'the request\'s subject overrides');
  assert.deepEqual(three.reply_to, ['help@acme.example']);
  assert.deepEqual(three.template, { id: t.id, version: 2 });
  const again2 = await call(`/v1/templates/${t.id}/publish`, { method: 'POST' });
  assert.equal(again2.body.current_version, 2, 'publishing an unchanged draft changes nothing');

  const versions = await call(`/v1/templates/${t.id}/versions`);
  assert.deepEqual(versions.body.data.map((v: Json) => v.version), [2, 1]);
  assert.ok(versions.body.data.every((v: Json) => /^tmplv_/.test(v.id) && v.published_at));
  assert.match((await call('/v1/emails')).body.data[0].template.id, /^tmpl_/);

  // Deleting the template leaves its emails as they were sent.
  assert.equal((await call(`/v1/templates/${t.id}`, { method: 'DELETE' })).status, 204);
  assert.equal((await call(`/v1/templates/${t.id}`)).status, 404);
  const kept = await email(first.id);
  assert.equal(kept.html, first.html);
  assert.deepEqual(kept.template, { id: t.id, version: 1 });
  const gone = await send({ template: { id: t.id, variables: { name: 'x' } } });
  assert.equal(gone.status, 422);
  assert.equal(gone.body.detail[0].type, 'template_not_found');
});

test('escaping: {{x}} is escaped in html only, {{{x}}} is raw everywhere', async () => {
  const t = (await create({
    name: 'Escape', subject: 'S {{v}}', html: '<p>{{v}}</p><div>{{{v}}}</div>', text: 'T {{v}} {{{v}}}',
    from: 'a@example.com', variables: [{ key: 'v', type: 'string' }],
  })).body;
  await call(`/v1/templates/${t.id}/publish`, { method: 'POST' });
  const value = '<b>x</b>&"';
  const e = await email((await send({ template: { id: t.id, variables: { v: value } } })).body.id);
  assert.equal(e.html, '<p>&lt;b&gt;x&lt;/b&gt;&amp;&quot;</p><div><b>x</b>&"</div>');
  assert.equal(e.text, `T ${value} ${value}`);
  assert.equal(e.subject, `S ${value}`);
});

test('sending errors: content beside a template, missing and mistyped variables, in a send and in a batch', async () => {
  const t = (await create({ ...welcome, alias: 'errors' })).body;
  await call(`/v1/templates/${t.id}/publish`, { method: 'POST' });
  const withHtml = await send({ template: { id: t.id, variables: { name: 'a' } }, html: '<p>x</p>' });
  assert.equal(withHtml.status, 422);
  assert.deepEqual(withHtml.body.detail[0].loc, ['body', 'html']);
  assert.equal((await send({ template: { id: t.id, variables: { name: 'a' } }, text: 'x' })).status, 422);

  const missing = await send({ template: { id: t.id, variables: {} } });
  assert.equal(missing.status, 422);
  assert.deepEqual(missing.body.detail, [{ loc: ['body', 'template', 'variables', 'name'], msg: 'Variable name is required: it has no fallback_value', type: 'missing' }]);
  for (const variables of [{ name: 7 }, { name: 'a', count: '3' }, { name: ['a'] }, { name: { a: 1 } }]) {
    const res = await send({ template: { id: t.id, variables } });
    assert.equal(res.status, 422, JSON.stringify(variables));
    const bad = Object.keys(variables).find((k) => k !== 'name' || typeof (variables as Json).name !== 'string')!;
    assert.deepEqual(res.body.detail[0].loc, ['body', 'template', 'variables', bad]);
  }
  assert.equal((await send({ template: { id: 'no-such-alias' } })).body.detail[0].type, 'template_not_found');
  assert.equal((await send({ template: { id: 'Not An Alias' } })).body.detail[0].type, 'template_not_found');
  const noFrom = await call('/v1/emails', { body: { to: 'a@example.net', subject: 's', text: 't' } });
  assert.deepEqual(noFrom.body.detail[0].loc, ['body', 'from'], 'without a template, from is still required');

  const batch = await call('/v1/emails/batch', { body: [
    { from: 'a@example.com', to: 'b@example.net', template: { id: 'errors', variables: { name: 'ok' } } },
    { from: 'a@example.com', to: 'b@example.net', template: { id: 'errors', variables: { count: 1 } } },
  ] });
  assert.equal(batch.status, 422);
  assert.deepEqual(batch.body.detail[0].loc, ['body', 1, 'template', 'variables', 'name']);
  const good = await call('/v1/emails/batch', { body: [
    { from: 'a@example.com', to: 'b@example.net', template: { id: 'errors', variables: { name: 'one' } } },
    { from: 'a@example.com', to: 'b@example.net', subject: 'plain', text: 'plain' },
  ] });
  assert.equal(good.status, 201);
  assert.equal((await email(good.body.data[0].id)).subject, 'Hi one');
  assert.equal((await email(good.body.data[1].id)).template, null);

  // An Idempotency-Key repeat is recognised by the request, not by what it rendered.
  const headers = { 'idempotency-key': 'tmpl-1' };
  const body = { from: 'a@example.com', to: 'b@example.net', template: { id: 'errors', variables: { name: 'idem' } } };
  const r1 = await ctx.call(key, '/v1/emails', { method: 'POST', body, headers });
  await call(`/v1/templates/${t.id}`, { method: 'PATCH', body: { subject: 'Changed' } });
  await call(`/v1/templates/${t.id}/publish`, { method: 'POST' });
  const r2 = await ctx.call(key, '/v1/emails', { method: 'POST', body, headers });
  assert.equal(r2.status, 201);
  assert.equal((await r2.json() as Json).id, (await r1.json() as Json).id);
});

test('bad input renders nothing from JavaScript internals and never answers 500', async () => {
  const t = (await create({
    name: 'Internals',
    html: '[{{#each this}}{{constructor}}{{__proto__}}{{this.constructor}}{{/each}}|{{lookup this "constructor"}}|{{lookup name "__proto__"}}|{{name.constructor}}|{{lookup (lookup this "name") "constructor"}}|{{#with name}}{{constructor.name}}{{/with}}]',
    variables: [{ key: 'name', type: 'string' }],
  })).body;
  assert.ok(t.id, JSON.stringify(t));
  const out = await call(`/v1/templates/${t.id}/render`, { body: { variables: { name: 'Ann', constructor: 'x', __proto__: { polluted: 1 } } } });
  assert.equal(out.status, 200, JSON.stringify(out.body));
  assert.equal(out.body.html, '[|||||]');
  assert.equal(({} as Json).polluted, undefined);

  const runtime = (await create({ name: 'Runtime', html: '{{#each}}x{{/each}}{{#with}}y{{/with}}' })).body;
  const failed = await call(`/v1/templates/${runtime.id}/render`, { body: {} });
  assert.equal(failed.status, 422, JSON.stringify(failed.body));
  assert.equal(failed.body.detail[0].type, 'template_render_failed');
});

test('a huge {{#each}} stays within EMAIL_MAX_MESSAGE_BYTES and answers 422 message_too_large past it', async () => {
  const variables = Array.from({ length: 10 }, (_, i) => ({ key: `v${i}`, type: 'string' as const }));
  const t = (await create({
    name: 'Cubed', from: 'a@example.com', subject: 'big',
    html: '{{#each this}}{{#each @root}}{{#each @root}}{{this}}{{/each}}{{/each}}{{/each}}', variables,
  })).body;
  await call(`/v1/templates/${t.id}/publish`, { method: 'POST' });
  const values = (size: number) => Object.fromEntries(variables.map((v) => [v.key, 'x'.repeat(size)]));
  const small = await send({ template: { id: t.id, variables: values(10) } });
  assert.equal(small.status, 201, JSON.stringify(small.body));
  assert.equal((await email(small.body.id)).html.length, 1000 * 10);
  const started = Date.now();
  const huge = await send({ template: { id: t.id, variables: values(5_000) } });
  assert.equal(huge.status, 422);
  assert.equal(huge.body.detail[0].type, 'message_too_large');
  assert.deepEqual(huge.body.detail[0].loc, ['body']);
  assert.equal(huge.body.detail[0].ctx.limit_bytes, LIMIT);
  assert.ok(Date.now() - started < 2000, 'refused without building the whole output');
  const rendered = await call(`/v1/templates/${t.id}/render`, { body: { variables: values(5_000) } });
  assert.equal(rendered.status, 422);
  assert.equal(rendered.body.detail[0].type, 'message_too_large');

  // Loops that print nothing still end: 100 variables nested four deep would be 10^8 turns.
  const many = Array.from({ length: 100 }, (_, i) => ({ key: `k${i}`, type: 'number' as const, fallback_value: i }));
  const spin = (await create({ name: 'Spin', html: `{{#each this}}${'{{#each @root}}'.repeat(3)}${'{{/each}}'.repeat(3)}{{/each}}done`, variables: many })).body;
  const spinStarted = Date.now();
  const spun = await call(`/v1/templates/${spin.id}/render`, { body: {} });
  assert.equal(spun.status, 422);
  assert.equal(spun.body.detail[0].type, 'message_too_large');
  assert.ok(Date.now() - spinStarted < 2000, 'stopped early');
});

test('each published version compiles once in the API process, not once per send', async () => {
  const t = (await create({ name: 'Cached', from: 'a@example.com', subject: '{{n}}', html: '<p>{{n}}</p>', variables: [{ key: 'n', type: 'string' }] })).body;
  await call(`/v1/templates/${t.id}/publish`, { method: 'POST' });
  // Checked and compiled at create; publishing the same text and sending compile nothing more.
  const before = await templateCompiles();
  for (let i = 0; i < 5; i++) assert.equal((await send({ template: { id: t.id, variables: { n: String(i) } } })).status, 201);
  assert.equal(await templateCompiles(), before);
});

test('a sending key gets 403 on every template route; the routes are in /openapi.json with their errors', async () => {
  const sender = await createApiKey(ctx.sql, projectId, 'sender', 'sending');
  for (const [method, path] of [['GET', '/v1/templates'], ['POST', '/v1/templates'], ['GET', '/v1/templates/welcome'], ['PATCH', '/v1/templates/welcome'],
    ['POST', '/v1/templates/welcome/publish'], ['GET', '/v1/templates/welcome/versions'], ['POST', '/v1/templates/welcome/render'], ['DELETE', '/v1/templates/welcome']]) {
    const res = await ctx.call(sender.key, path!, { method, body: method === 'GET' || method === 'DELETE' ? undefined : {} });
    assert.equal(res.status, 403, `${method} ${path}`);
    assert.equal(((await res.json()) as Json).error.type, 'permission_denied');
  }
  const doc = (await (await ctx.call(undefined, '/openapi.json')).json()) as Json;
  for (const [path, method, statuses] of [
    ['/v1/templates', 'post', ['201', '401', '403', '422']], ['/v1/templates', 'get', ['200', '401', '403']],
    ['/v1/templates/{template_id}', 'get', ['200', '404']], ['/v1/templates/{template_id}', 'patch', ['200', '404', '422']],
    ['/v1/templates/{template_id}', 'delete', ['204', '404']], ['/v1/templates/{template_id}/publish', 'post', ['200', '404']],
    ['/v1/templates/{template_id}/versions', 'get', ['200', '404']], ['/v1/templates/{template_id}/render', 'post', ['200', '404', '422']],
  ] as const) {
    const op = doc.paths[path]?.[method];
    assert.ok(op, `${method} ${path}`);
    for (const s of statuses) assert.ok(op.responses[s], `${method} ${path} ${s}`);
  }
  assert.ok(doc.components.schemas.SendTemplateRef, 'the send request documents template');
});

test('a publish made by another process reaches this process\'s sends through its notification', async () => {
  const t = (await create({ name: 'Elsewhere', from: 'a@example.com', subject: 's', html: '<p>one</p>', alias: 'elsewhere' })).body;
  await call(`/v1/templates/${t.id}/publish`, { method: 'POST' });
  await call(`/v1/templates/${t.id}`, { method: 'PATCH', body: { html: '<p>two</p>' } });
  // Warm this process's answer for the alias.
  for (let i = 0; i < 2; i++) assert.equal((await email((await send({ template: { id: 'elsewhere' } })).body.id)).html, '<p>one</p>');
  // What another API process, or the CLI, does: the publish and its NOTIFY, on a connection of its own.
  const { publishDraft } = await import('../../src/templates/queries.ts');
  const { TEMPLATES_CHANNEL } = await import('../../src/templates/published.ts');
  const { createSql } = await import('../../src/platform/db.ts');
  const other = createSql(ctx.url, { max: 1, appName: 'other-process' });
  try {
    await publishDraft(other, projectId, t.id);
    await other`select pg_notify(${TEMPLATES_CHANNEL}, '')`;
  } finally {
    await other.end();
  }
  const started = Date.now();
  let html = '';
  while (Date.now() - started < 2000) {
    html = (await email((await send({ template: { id: 'elsewhere' } })).body.id)).html;
    if (html === '<p>two</p>') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(html, '<p>two</p>', 'the new version is used within moments of the notification');
});
