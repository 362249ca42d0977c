import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { browserSkip, serveApp, launchBrowser, watchPage } from '../helpers/browser.ts';
import { startFakeOidc } from '../helpers/fake-oidc.ts';
import { memberSession } from './client.ts';

const skip = browserSkip('the single sign-on browser test');

test('a real browser: the sign-in page\'s single sign-on link, through the provider and back, signs in an allowed domain as a viewer', { skip, timeout: 60_000 }, async () => {
  const idp = await startFakeOidc({ clientId: 'mailroom', clientSecret: 'shh' });
  const ctx = await createTestContext({
    env: { NODE_ENV: 'development', OIDC_ISSUER: idp.issuer, OIDC_CLIENT_ID: 'mailroom', OIDC_CLIENT_SECRET: 'shh', OIDC_ALLOWED_DOMAINS: 'example.org' },
  });
  await memberSession(ctx, 'owner', 'boss@example.com');
  const origin = await serveApp(ctx.app);
  const errors: string[] = [];
  const page = watchPage(await (await launchBrowser()).newPage(), errors);
  idp.next.user = { email: 'sam@example.org' };
  await page.goto(`${origin}/dashboard/login`);
  await page.click('#sso a');
  await page.waitForURL(`${origin}/dashboard`);
  assert.match((await page.textContent('header'))!, /sam@example\.org \(viewer\)/);
  const cookies = await page.context().cookies();
  assert.ok(cookies.find((c) => c.name === 'mailroom_session')?.httpOnly);
  assert.equal(cookies.some((c) => c.name === 'mailroom_oidc'), false, 'the pending sign-in cookie is spent');
  assert.deepEqual(errors, []);
});
