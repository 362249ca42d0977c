import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { spawnEntry } from '../helpers/process.ts';
import { whileProbing as probe } from '../helpers/responsiveness.ts';
import { SmtpSession, emailIdOf } from '../relay/setup.ts';

// §18.1: no request blocks the event loop. Each heavy request goes to a real API process while a
// /healthz loop probes it; every probe must answer within 250 ms, and the API's RSS stay < 400 MB.

const ctx = await createTestContext();
const { key } = await ctx.tenant();
// Registered before the spawn, so it runs before the spawn helper's own SIGKILL: SIGTERM lets the
// API stop in order, its connections closed.
after(async () => {
  api.child.kill('SIGTERM');
  await api.exited;
});
const api = spawnEntry('src/api.ts', {
  DATABASE_URL: ctx.url, REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379', SECRET_KEY: TEST_SECRET_KEY,
  PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', API_RATE_LIMIT_PER_MINUTE: '100000',
  RELAY_SMTP_PORT: '0', RELAY_SMTP_HOST: '127.0.0.1', RELAY_ALLOW_PLAINTEXT_AUTH: 'yes',
});
const { url } = (await api.logLine('api listening')) as { url: string };
const relayPort = ((await api.logLine('smtp relay listening')) as { listeners: { port: number }[] }).listeners[0]!.port;

/** §18.1's probe loop beside each request, with the API's RSS. */
const whileProbing = <T>(label: string, work: () => Promise<T>) => probe(url, label, work, { pid: api.child.pid! });

async function call(path: string, body: unknown, raw?: Buffer) {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: raw ? new Uint8Array(raw) : JSON.stringify(body),
  });
  const text = await res.text();
  let json: { detail?: { type: string; loc: unknown[] }[]; id?: string } = {};
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: json, text };
}

function assertResponsive(label: string, m: { worst: number; rss: number }) {
  assert.ok(m.worst < 250, `${label}: a /healthz probe waited ${m.worst.toFixed(0)} ms`);
  assert.ok(m.rss < 400, `${label}: the API's RSS reached ${m.rss.toFixed(0)} MB`);
}

const HEAVY = '{{v}}'.repeat(100_000);
const AT_CAP = '{{v}}'.repeat(2_000);
const AMPS = '&'.repeat(2000);
let templateId = '';

test('a template of 100,000 {{v}} per part is refused at once; one at the cap is rendered and sent with a budget, never blocking the API', { timeout: 300_000 }, async () => {
  const refused = await whileProbing('create template (100,000 {{v}} in html and text)', () => call('/v1/templates', {
    name: 'Heavy', from: 'app@acme.test', subject: '{{v}}', html: HEAVY, text: HEAVY, variables: [{ key: 'v', type: 'string' }],
  }));
  assert.equal(refused.result.status, 422, refused.result.text.slice(0, 300));
  assert.deepEqual(refused.result.body.detail!.map((d) => [d.type, d.loc.at(-1)]), [['too_many_expressions', 'html'], ['too_many_expressions', 'text']]);
  assertResponsive('create refused', refused);

  // 2,000 {{v}} per part, v = 2,000 `&`: 20 MB of escaped html, twice the message limit.
  const created = await whileProbing('create template (2,000 {{v}} in html and text)', () => call('/v1/templates', {
    name: 'Heavy', from: 'app@acme.test', subject: '{{v}}', html: AT_CAP, text: AT_CAP, variables: [{ key: 'v', type: 'string' }],
  }));
  assert.equal(created.result.status, 201, created.result.text.slice(0, 300));
  assertResponsive('create', created);
  templateId = created.result.body.id!;

  const rendered = await whileProbing('render (v = 2,000 &)', () => call(`/v1/templates/${templateId}/render`, { variables: { v: AMPS } }));
  assert.equal(rendered.result.status, 422);
  assert.equal(rendered.result.body.detail![0]!.type, 'message_too_large');
  assertResponsive('render', rendered);

  // A modest value renders whole: the budget stops only output past the limit.
  const small = await call(`/v1/templates/${templateId}/render`, { variables: { v: 'a' } });
  assert.equal(small.status, 200);

  assert.equal((await call(`/v1/templates/${templateId}/publish`, {})).status, 200);
  const sent = await whileProbing('send', () => call('/v1/emails', { to: 'ann@example.net', template: { id: templateId, variables: { v: AMPS } } }));
  assert.equal(sent.result.status, 422);
  assert.equal(sent.result.body.detail![0]!.type, 'message_too_large');
  assertResponsive('send', sent);

  const batch = Array.from({ length: 100 }, () => ({ to: 'ann@example.net', template: { id: templateId, variables: { v: AMPS } } }));
  const batched = await whileProbing('batch of 100 sends', () => call('/v1/emails/batch', batch));
  assert.equal(batched.result.status, 422);
  // At most 100 problems listed, then one too_many_errors.
  assert.ok(batched.result.body.detail!.length <= 101);
  assertResponsive('batch', batched);
});

test('a string variable is at most 100 KB', async () => {
  const t = await call('/v1/templates', { name: 'Small', html: '<p>{{v}}</p>', variables: [{ key: 'v', type: 'string' }] });
  const over = await call(`/v1/templates/${t.body.id}/render`, { variables: { v: 'x'.repeat(100 * 1024 + 1) } });
  assert.equal(over.status, 422);
  assert.deepEqual(over.body.detail![0]!.loc, ['body', 'variables', 'v']);
  assert.equal(over.body.detail![0]!.type, 'string_too_long');
  assert.equal((await call(`/v1/templates/${t.body.id}/render`, { variables: { v: 'x'.repeat(100 * 1024) } })).status, 200);
});

test('POST /v1/emails with 20 MiB of 1.2 million headers, or of 1.2 million template variables, is refused without blocking', { timeout: 120_000 }, async () => {
  const entries = (prefix: string) => {
    const parts: string[] = [];
    for (let i = 0; i < 1_200_000; i++) parts.push(`"${prefix}${i}":"v"`);
    return `{${parts.join(',')}}`;
  };
  const headers = Buffer.from(`{"from":"app@acme.test","to":"ann@example.net","subject":"s","text":"t","headers":${entries('X-H-')}}`);
  assert.ok(headers.length > 18 * 1024 * 1024);
  const h = await whileProbing('POST /v1/emails, 1.2 million headers', () => call('/v1/emails', null, headers));
  assert.equal(h.result.status, 422);
  assert.deepEqual(h.result.body.detail![0]!.loc, ['body', 'headers']);
  assertResponsive('headers', h);

  const variables = Buffer.from(`{"to":"ann@example.net","template":{"id":"${templateId || 'welcome'}","variables":${entries('v')}}}`);
  const v = await whileProbing('POST /v1/emails, 1.2 million template variables', () => call('/v1/emails', null, variables));
  assert.equal(v.result.status, 422);
  assert.deepEqual(v.result.body.detail![0]!.loc, ['body', 'template', 'variables']);
  assertResponsive('variables', v);
});

test('a map is counted before its entries are validated, and a 422 lists at most 100 problems', async () => {
  const headers = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`bad name ${i}`, 'v']));
  const one = await call('/v1/emails', { from: 'app@acme.test', to: 'ann@example.net', subject: 's', text: 't', headers });
  assert.equal(one.status, 422);
  assert.deepEqual(one.body.detail!.map((d) => d.type), ['too_long'], 'one problem: the count, not 51 bad names');

  // 100 items with five problems each: 500 found, 100 listed, then too_many_errors once.
  const bad = Array.from({ length: 100 }, () => ({ from: 'not an address', to: 'also not', subject: 1, html: 2, cc: 'nope' }));
  const many = await call('/v1/emails/batch', bad);
  assert.equal(many.status, 422);
  const detail = many.body.detail!;
  assert.equal(detail.length, 101);
  assert.equal(detail.filter((d) => d.type === 'too_many_errors').length, 1);
  assert.equal(detail.at(-1)!.type, 'too_many_errors');
});

test('four relayed messages of 2 million empty header fields at once are refused as they stream, without blocking', { timeout: 120_000 }, async () => {
  const { key: relayKey, projectId } = await ctx.tenant('relay-heavy');
  const heavy = Buffer.from(`${'X:\r\n'.repeat(2_000_000)}From: app@example.com\r\nTo: ann@example.net\r\nSubject: h\r\n\r\nbody\r\n`);
  const sessions = await Promise.all([0, 1, 2, 3].map(async () => {
    const s = await SmtpSession.open(relayPort);
    await s.command('EHLO client.test');
    assert.match(await s.auth(relayKey), /^235/);
    return s;
  }));
  const sent = await whileProbing('relay: 4 messages of 2 million empty header fields at once', () =>
    Promise.all(sessions.map((s) => s.send('app@example.com', ['ann@example.net'], heavy))));
  for (const reply of sent.result) assert.match(reply, /^550 5\.6\.0 Header section refused: more than 1000 header fields/);
  assertResponsive('relay', sent);
  // Nothing stored, and each connection takes the next message.
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId}`;
  assert.equal(n, 0);
  const next = await sessions[0]!.send('app@example.com', ['ann@example.net'], 'From: app@example.com\r\nTo: ann@example.net\r\nSubject: ok\r\n\r\nbody\r\n');
  assert.ok(emailIdOf(next), next);
  for (const s of sessions) s.close();
});
