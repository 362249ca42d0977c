import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { browserSkip, serveApp, launchBrowser, watchPage, signUpOwner } from '../helpers/browser.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';

const skip = browserSkip('the team browser test');

test('a real browser: the Team page invites, the link joins, roles change what each member sees and may do', { skip, timeout: 120_000 }, async () => {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
  const origin = await serveApp(ctx.app);
  const browser = await launchBrowser();
  const errors: string[] = [];
  const owner = watchPage(await (await browser.newContext()).newPage(), errors, { httpErrors: false });
  await signUpOwner(owner, origin);
  const { projectId } = await ctx.tenant('Shop');
  await createEndpoint(ctx.sql, ctx.config, projectId, 'http://127.0.0.1:9/hook');
  const P = `${origin}/dashboard/projects/${projectId}`;

  // The owner invites a developer from the Team page; the link is shown once.
  await owner.click('header a:text("Team")');
  await owner.waitForURL(`${origin}/dashboard/team`);
  assert.equal(await owner.locator('#members tbody tr').count(), 1);
  await owner.fill('input[name=email]', 'dev@example.com');
  await owner.selectOption('form[action="/dashboard/team/invitations"] select[name=role]', 'developer');
  await owner.click('button:text("Invite")');
  const link = (await owner.textContent('#invite-url'))!.trim();
  assert.match(link, /\/dashboard\/join\/[\w-]{43}$/);

  // The invitee follows it in their own browser, sets a password, and is a developer.
  const devContext = await browser.newContext();
  const dev = watchPage(await devContext.newPage(), errors, { httpErrors: false });
  await dev.goto(link);
  assert.equal(await dev.inputValue('input[name=email]'), 'dev@example.com');
  await dev.fill('input[name=password]', 'a developer password');
  await dev.click('button:text("Join")');
  await dev.waitForURL(`${origin}/dashboard`);
  assert.match((await dev.textContent('header'))!, /dev@example\.com \(developer\)/);

  // A developer manages keys, but not the team: no invite form, and a forged post is a 403 naming the role.
  await dev.goto(`${P}/keys`);
  assert.equal(await dev.locator('button:text("Create key")').count(), 1);
  await dev.goto(`${origin}/dashboard/team`);
  assert.equal(await dev.locator('button:text("Invite")').count(), 0);
  assert.equal(await dev.locator('button:text("Change role")').count(), 0);
  const csrf = await dev.getAttribute('input[name=_csrf]', 'value');
  await dev.evaluate(({ token }) => {
    const f = document.createElement('form');
    f.method = 'post';
    f.action = '/dashboard/team/invitations';
    for (const [k, v] of [['_csrf', token], ['email', 'friend@example.com'], ['role', 'owner']]) {
      const i = document.createElement('input');
      i.name = k!;
      i.value = v!;
      f.append(i);
    }
    document.body.append(f);
    f.submit();
  }, { token: csrf! });
  await dev.waitForSelector('h1:text("Not allowed")');
  assert.match((await dev.textContent('main'))!, /This needs the admin role \(or owner\)\. You are signed in as a developer/);
  assert.equal((await ctx.sql`select 1 from member_invitations where email = 'friend@example.com'`).length, 0);

  // The owner makes them a viewer: their next request finds their session gone.
  await owner.goto(`${origin}/dashboard/team`);
  const row = owner.locator('#members tr', { hasText: 'dev@example.com' });
  await row.locator('select[name=role]').selectOption('viewer');
  await row.locator('button:text("Change role")').click();
  await owner.waitForURL(`${origin}/dashboard/team`);
  assert.equal((await row.locator('td.role').textContent())!.trim(), 'viewer');
  await dev.goto(`${P}/keys`);
  await dev.waitForURL(`${origin}/dashboard/login`);

  // As a viewer: every page opens, read only, with no form but sign-out and no secret.
  await dev.fill('input[name=email]', 'dev@example.com');
  await dev.fill('input[name=password]', 'a developer password');
  await dev.click('button:text("Sign in")');
  await dev.waitForURL(`${origin}/dashboard`);
  const [endpoint] = await ctx.sql<[{ id: string }]>`select id from webhook_endpoints where project_id = ${projectId}`;
  for (const path of ['', '/emails', '/inbox', '/templates', '/suppressions', '/webhooks', `/webhooks/${endpoint.id}`, '/domains', '/keys']) {
    const res = await dev.goto(`${P}${path}`);
    assert.equal(res!.status(), 200, path);
    const posts = await dev.locator('form[method=post]').evaluateAll((forms) => forms.map((f) => f.getAttribute('action')));
    assert.deepEqual(posts, ['/dashboard/logout'], `viewer at ${path || 'overview'}`);
    assert.doesNotMatch(await dev.content(), /Reveal signing secret|whsec_|sk_[\w-]{20}/);
  }
  for (const path of ['/dashboard', '/dashboard/team']) {
    await dev.goto(`${origin}${path}`);
    assert.deepEqual(await dev.locator('form[method=post]').evaluateAll((forms) => forms.map((f) => f.getAttribute('action'))), ['/dashboard/logout']);
  }
  assert.equal((await dev.goto(`${origin}/dashboard/audit`))!.status(), 403);

  // The last owner cannot demote themselves; a removal signs the member out.
  await owner.goto(`${origin}/dashboard/team`);
  const me = owner.locator('#members tr', { hasText: 'owner@example.com' });
  await me.locator('select[name=role]').selectOption('admin');
  await me.locator('button:text("Change role")').click();
  await owner.waitForSelector('.error');
  assert.match((await owner.textContent('.error'))!, /last owner cannot be demoted/);
  const devRow = owner.locator('#members tr', { hasText: 'dev@example.com' });
  await devRow.locator('button:text("Remove")').click();
  await owner.waitForURL(`${origin}/dashboard/team`);
  assert.equal(await owner.locator('#members tr', { hasText: 'dev@example.com' }).count(), 0);
  await dev.goto(`${origin}/dashboard`);
  await dev.waitForURL(`${origin}/dashboard/login`);

  // The spent invitation link no longer works.
  const again = await (await browser.newContext()).newPage();
  assert.equal((await again.goto(link))!.status(), 410);
  assert.deepEqual(errors.filter((e) => !/status of 40[39]|status of 410/.test(e)), []);
});
