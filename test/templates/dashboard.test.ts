import { test } from 'node:test';
import assert from 'node:assert/strict';
import { signedInWithTwoProjects } from '../dashboard/client.ts';

const { b, a, P, Q } = await signedInWithTwoProjects();

test('the templates pages: create, a refused edit says where, preview frame, publish; another project cannot reach them', async () => {
  await b.get(`${P}/templates`);
  const made = await b.post(`${P}/templates`, { name: 'Dash', alias: 'dash', html: '<p>Hi</p>' });
  assert.equal(made.res.status, 303);
  const path = made.res.headers.get('location')!;
  assert.match(path, new RegExp(`^${P}/templates/tmpl_\\w{26}$`));

  const page = await b.get(path);
  assert.equal(page.res.status, 200);
  assert.match(page.text, /<iframe sandbox="" src="[^"]+\/preview"/);
  const refused = await b.post(path, { name: 'Dash', alias: 'dash', html: '<p>\n{{missing}}</p>', subject: '', text: '', from: '', variables: '[]' });
  assert.equal(refused.res.status, 422);
  assert.match(refused.text, /html: html, line 2, column 3: &quot;missing&quot; is not declared in variables/);
  assert.match(refused.text, /\{\{missing\}\}/, 'what was typed is kept');
  const badJson = await b.post(path, { name: 'Dash', html: '<p>x</p>', variables: '[{' });
  assert.equal(badJson.res.status, 422);

  const saved = await b.post(path, { name: 'Dash', alias: 'dash', html: '<p>Hi {{who}}</p>', subject: 'S', text: '', from: 'a@example.com', variables: '[{"key":"who","type":"string"}]' });
  assert.equal(saved.res.status, 303);
  const withoutSample = await b.get(path);
  assert.match(withoutSample.text, /The preview needs other values: variables\.who/);
  const preview = await b.get(`${path}/preview?sample.who=%3Cx%3E`);
  assert.equal(preview.res.status, 200);
  assert.equal(preview.text, '<p>Hi &lt;x&gt;</p>');
  assert.match(preview.res.headers.get('content-security-policy')!, /sandbox/);

  assert.equal((await b.post(`${path}/publish`)).res.status, 303);
  assert.match((await b.get(path)).text, /id="versions"/);

  // Project B's pages cannot open A's template.
  const id = path.split('/').at(-1);
  assert.equal((await b.get(`${Q}/templates/${id}`)).res.status, 404);
  assert.equal((await b.get(`${Q}/templates/${id}/preview`)).res.status, 404);
  assert.equal((await b.get(`${Q}/templates/tmpl_bad`)).res.status, 404);
  assert.ok(a.projectId);
});
