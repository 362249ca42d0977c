import http from 'node:http';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { newId } from '../../src/platform/ids.ts';
import { browserSkip, serveApp, launchBrowser, watchPage, signUpOwner } from '../helpers/browser.ts';

const skip = browserSkip('the tracking browser test');

test('a real browser: domain tracking switches, webhook event types, an email\'s opens and clicks, and the chart\'s lines; no console errors', { skip, timeout: 120_000 }, async () => {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development', PUBLIC_BASE_URL: 'https://mail.example.test' } });
  await startTestWorker(ctx.config, ctx.sql);
  const origin = await serveApp(ctx.app);

  const browser = await launchBrowser();
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const consoleErrors: string[] = [];
  watchPage(page, consoleErrors);

  await signUpOwner(page, origin);
  await page.fill('input[name=name]', 'Tracking');
  await page.click('button:has-text("Create project")');
  await page.waitForURL(/\/keys$/);
  const projectPath = new URL(page.url()).pathname.replace(/\/keys$/, '');
  const projectId = projectPath.split('/').pop()!;
  await page.fill('input[name=name]', 'app');
  await page.click('button:has-text("Create key")');
  const key = (await page.textContent('#new-key'))!;

  // Domain switches: a verified domain (as `domain add` and a check leave it), switched on from its page.
  const domainId = newId('domain');
  await ctx.sql`insert into domains (id, project_id, value, region, verification_status) values (${domainId}, ${projectId}, 'shop.example', 'us-east-1', 'success')`;
  await page.goto(`${origin}${projectPath}/domains`);
  assert.equal(await page.isChecked('input[name=open_tracking]'), false, 'off by default');
  await page.check('input[name=open_tracking]');
  await page.check('input[name=click_tracking]');
  await page.fill('input[name=tracking_domain]', 'Track.Shop.Example');
  await page.click('button:has-text("Save tracking")');
  await page.waitForURL(/\/domains$/);
  assert.equal(await page.isChecked('input[name=click_tracking]'), true);
  assert.equal(await page.inputValue('input[name=tracking_domain]'), 'track.shop.example');
  const [domain] = await ctx.sql`select open_tracking, click_tracking, tracking_domain from domains where id = ${domainId} and project_id = ${projectId}`;
  assert.deepEqual({ ...domain }, { openTracking: true, clickTracking: true, trackingDomain: 'track.shop.example' });

  // Webhook event types: registered for clicks alone, shown on its page.
  await page.click('nav >> text=Webhooks');
  await page.fill('input[name=url]', 'http://127.0.0.1:9/hook');
  await page.check('input[name=event_types][value="email.clicked"]');
  await page.click('button:has-text("Register")');
  await page.waitForURL(/\/webhooks\/wh_\w{26}$/);
  assert.equal(await page.textContent('#event-types'), 'email.clicked');
  await page.check('input[name=event_types][value="email.opened"]');
  await page.click('button:has-text("Save event types")');
  await page.waitForURL(/\/webhooks\/wh_\w{26}$/);
  assert.equal(await page.textContent('#event-types'), 'email.opened, email.clicked');

  // Mail from the domain is tracked through its tracking domain; opened once and clicked twice.
  const res = await fetch(`${origin}/v1/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ from: 'Shop <news@shop.example>', to: 'ann@example.net', subject: 'Spring sale', html: '<p><a href="https://shop.example/sale">Sale</a></p>', text: 'Sale' }),
  });
  assert.equal(res.status, 201);
  const { id } = (await res.json()) as { id: string };
  const caught = await waitFor('the sink to catch the email', async () => (await ctx.sql<{ html: string }[]>`select html from sink_messages where email_id = ${id} and project_id = ${projectId}`)[0]?.html, 20_000);
  // The sink catches the message before the worker records it sent; a reader opens it after.
  await waitFor('the email sent', async () => (await ctx.sql`select 1 from emails where id = ${id} and project_id = ${projectId} and status = 'sent'`).length === 1);
  // Asked for on the tracking domain, as a proxy in front forwards it (§18.11).
  const clickPath = /https:\/\/track\.shop\.example(\/t\/c\/[\w-]+)/.exec(caught)![1];
  const openPath = /https:\/\/track\.shop\.example(\/t\/o\/[\w-]+)/.exec(caught)![1];
  assert.equal((await onTrackingHost(origin, openPath!, 'Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Thunderbird/115.0')).status, 200);
  for (const agent of ['Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/120.0', 'Mozilla/5.0 (compatible; Barracuda Sentinel)']) {
    const click = await onTrackingHost(origin, clickPath!, agent);
    assert.equal(click.location, 'https://shop.example/sale');
  }
  await waitFor('the open and the clicks', async () => (await ctx.sql`select 1 from events where email_id = ${id} and project_id = ${projectId} and type in ('email.opened', 'email.clicked')`).length === 3);

  await page.goto(`${origin}${projectPath}/emails/${id}`);
  assert.match((await page.textContent('#email-opened'))!, /^1 time, first /);
  assert.match((await page.textContent('#email-clicked'))!, /^2 times \(1 by machines\), first /);
  const timeline = await page.locator('#timeline tbody tr td:nth-child(2)').allTextContents();
  assert.deepEqual(timeline, ['email.sent', 'email.delivered', 'email.opened', 'email.clicked', 'email.clicked']);
  assert.deepEqual(await page.locator('#clicks-by-link tbody td').allTextContents(), ['https://shop.example/sale', '2', '1']);
  const deliveries = await page.locator('#email-deliveries tbody tr td:nth-child(2)').allTextContents();
  assert.deepEqual(deliveries.sort(), ['email.clicked', 'email.clicked', 'email.opened'], 'only the chosen types went to the endpoint');

  await page.goto(`${origin}${projectPath}`);
  assert.match((await page.textContent('#totals .stat[data-series=opened]'))!, /^1\s*opened$/);
  assert.match((await page.textContent('#totals .stat[data-series=clicked]'))!, /^2\s*clicked$/);
  for (const [series, count] of [['opened', 1], ['clicked', 2]] as const) {
    const bars = page.locator(`svg.chart g[data-series=${series}] rect`);
    assert.equal(await bars.count(), 14);
    const titles = await bars.locator('title').allTextContents();
    assert.ok(titles.at(-1)!.endsWith(`: ${count} ${series}`), titles.at(-1));
    assert.ok(Number(await bars.last().getAttribute('height')) > 0, `today's ${series} bar is drawn`);
  }
  assert.equal(await page.locator('.legend li', { hasText: 'clicked' }).count(), 1);
  assert.deepEqual(consoleErrors, []);
});

/** A GET to the API with the tracking domain as Host, as the proxy in front of it forwards one (fetch sets its own). */
function onTrackingHost(origin: string, path: string, agent: string): Promise<{ status?: number; location?: string }> {
  const u = new URL(origin);
  return new Promise((resolve, reject) => {
    http.get({ host: u.hostname, port: u.port, path, headers: { host: 'track.shop.example', 'user-agent': agent } }, (res) => {
      res.resume();
      resolve({ status: res.statusCode, location: res.headers.location });
    }).on('error', reject);
  });
}
