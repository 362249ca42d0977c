import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestWorker } from '../helpers/worker.ts';
import { createSegment } from '../../src/segments/service.ts';
import { DASHBOARD_MAX_BODY_BYTES } from '../../dashboard/app.tsx';
import { signedInWithTwoProjects, type Browser } from './client.ts';

/** §23.2/§23.9: the Contacts page's CSV upload, streamed past the form limit, and the import's live page. */

const { ctx, b, a, other, P, Q } = await signedInWithTwoProjects();

const cookie = (br: Browser) => [...br.jar].map(([k, v]) => `${k}=${v}`).join('; ');

/** The upload form as a browser sends it: multipart, the token in the action's query. */
async function upload(path: string, csv: string, fields: Record<string, string> = {}, init: { token?: string; origin?: string } = {}) {
  const form = new FormData();
  form.append('file', new Blob([csv], { type: 'text/csv' }), 'contacts.csv');
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  const token = init.token ?? b.csrf;
  return ctx.app.request(`${path}/imports?_csrf=${encodeURIComponent(token)}`, {
    method: 'POST', body: form, headers: { cookie: cookie(b), ...(init.origin ? { origin: init.origin } : {}) },
  });
}

function csv(rows: number, prefix: string) {
  const lines = ['email,first_name,last_name'];
  for (let i = 0; i < rows; i++) lines.push(`${prefix}${i}@example.com,First${i},Last${i}`);
  lines.push('not an address,Bad,Row');
  return `${lines.join('\n')}\n`;
}

test('a CSV larger than the form limit uploads from the Contacts page; its page shows the bar, then the counts', async () => {
  const seg = await createSegment(ctx.sql, a.projectId, { name: 'Imported' });
  const contacts = await b.get(`${P}/contacts`);
  assert.match(contacts.text, new RegExp(`<form method="post" action="${P}/imports\\?_csrf=${b.csrf}" enctype="multipart/form-data"`));
  assert.match(contacts.text, new RegExp(`<option value="\\[&quot;${seg.id}&quot;\\]">Imported</option>`));

  const body = csv(3000, 'imported-contact-');
  assert.ok(body.length > 2 * DASHBOARD_MAX_BODY_BYTES, `${body.length} bytes`);
  const res = await upload(P, body, { segments: JSON.stringify([seg.id]), on_conflict: 'skip' });
  assert.equal(res.status, 303, await res.text());
  const page = res.headers.get('location')!;
  assert.match(page, new RegExp(`^${P}/imports/cimp_\\w{26}$`));
  const id = page.split('/').at(-1)!;

  const queued = await b.get(page);
  assert.equal(queued.res.status, 200);
  assert.match(queued.text, /<progress id="import-progress" max="100" value="\d+" data-live="[^"]+\/live">/);
  assert.match(queued.text, /<noscript><meta http-equiv="refresh" content="2"\/?><\/noscript>/, 'without scripts the page refreshes itself');
  assert.match(queued.text, /<script src="\/dashboard\/assets\/live-progress\.js" defer/);
  assert.match((await b.get(`${P}/contacts`)).text, new RegExp(`href="${page}"`), 'listed under recent imports');

  // The stream follows the row until the worker has finished it, then ends.
  const worker = await startTestWorker(ctx.config, ctx.sql);
  after(() => worker.stop());
  const live = await ctx.app.request(`${page}/live`, { headers: { cookie: cookie(b) } });
  assert.equal(live.status, 200);
  assert.match(live.headers.get('content-type') ?? '', /text\/event-stream/);
  const events = (await live.text()).split('\n\n').filter((e) => e.startsWith('event: progress')).map((e) => JSON.parse(e.split('data: ')[1]!));
  const last = events.at(-1)!;
  assert.deepEqual(last, { status: 'completed', percent: 100, done: true, counts: { total: 3001, created: 3000, updated: 0, skipped: 0, failed: 1 } });

  const done = await b.get(page);
  assert.doesNotMatch(done.text, /http-equiv="refresh"|data-live=/, 'a finished import neither refreshes nor listens');
  assert.match(done.text, /<b data-count="created">3000<\/b>/);
  assert.match(done.text, /<td>3002<\/td><td>[^<]*email/i, 'the refused row, by line');
  const [n] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from contact_segments where segment_id = ${seg.id}`;
  assert.equal(n.n, 3000);
  assert.equal((await ctx.sql`select 1 from contact_imports where id = ${id}`).length, 1);
});

test('errors: a missing or wrong token, a foreign Origin, a form that is not multipart, a bad field', async () => {
  await b.get(`${P}/contacts`);
  const count = async () => (await ctx.sql<[{ n: number }]>`select count(*)::int as n from contact_imports where project_id = ${a.projectId}`)[0].n;
  const before = await count();
  assert.equal((await upload(P, csv(2, 'x'), {}, { token: '' })).status, 403);
  assert.equal((await upload(P, csv(2, 'x'), {}, { token: 'f'.repeat(64) })).status, 403);
  assert.equal((await upload(P, csv(2, 'x'), {}, { origin: 'https://evil.example' })).status, 403);
  const plain = await b.post(`${P}/imports`, { file: 'email\nx@example.com' });
  assert.equal(plain.res.status, 403, 'a urlencoded post carries no token in the query');
  const notMultipart = await ctx.app.request(`${P}/imports?_csrf=${b.csrf}`, {
    method: 'POST', body: 'email\n', headers: { cookie: cookie(b), 'content-type': 'text/csv' },
  });
  assert.equal(notMultipart.status, 422);
  assert.match(await notMultipart.text(), /multipart\/form-data/);
  const badField = await upload(P, csv(2, 'x'), { on_conflict: 'merge' });
  assert.equal(badField.status, 422);
  assert.match(await badField.text(), /on_conflict/);
  const noEmail = await upload(P, 'name\nAnn\n');
  assert.equal(noEmail.status, 422);
  assert.equal(await count(), before, 'nothing stored');
});

test('isolation: another project\'s import is a 404 through this project\'s URLs', async () => {
  await b.get(`${Q}/contacts`);
  const res = await upload(Q, csv(1, 'q'));
  assert.equal(res.status, 303);
  const theirs = res.headers.get('location')!.split('/').at(-1)!;
  assert.equal((await b.get(`${P}/imports/${theirs}`)).res.status, 404);
  assert.equal((await ctx.app.request(`${P}/imports/${theirs}/live`, { headers: { cookie: cookie(b) } })).status, 404);
  assert.equal((await b.get(`${P}/imports/nope`)).res.status, 404);
  assert.doesNotMatch((await b.get(`${P}/contacts`)).text, new RegExp(theirs));
  assert.ok(other.projectId);
});
