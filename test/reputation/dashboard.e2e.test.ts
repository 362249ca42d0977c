import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { browserSkip, serveApp, launchBrowser, watchPage, signUpOwner } from '../helpers/browser.ts';
import { connectProvider } from '../../src/providers/connections.ts';

const skip = browserSkip('the reputation dashboard test');

test('the overview shows both windows against SES\'s lines and the project\'s own, and a paused banner whose button resumes', { skip, timeout: 60_000 }, async () => {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
  const t = await ctx.tenant('Gauged');
  await connectProvider(ctx.sql, ctx.config, { projectId: t.projectId, region: 'eu-west-1', accessKeyId: 'AKIDGAUGE', secretAccessKey: 's' });
  // 1,000 recipients sent this hour, 30 of them hard-bounced: 3%, over the 2% warning, under the 4% pause.
  await ctx.sql`
    insert into reputation_counts (project_id, account_id, hour, metric, shard, n)
    select ${t.projectId}, ses_account_id, date_trunc('hour', now()), m.metric, 0, m.n
    from provider_connections, (values ('sent', 1000), ('bounced', 30)) m(metric, n) where project_id = ${t.projectId}`;
  const origin = await serveApp(ctx.app);
  const browser = await launchBrowser();
  const errors: string[] = [];
  const page = watchPage(await browser.newPage(), errors);
  await signUpOwner(page, origin);

  await page.goto(`${origin}/dashboard/projects/${t.projectId}`);
  assert.equal(await page.getAttribute('#reputation', 'data-state'), 'warning');
  assert.equal(await page.locator('#paused-banner').count(), 0, 'no banner while sending');
  const windows = await page.locator('#reputation .window').evaluateAll((els) => els.map((e) => `${e.getAttribute('data-scope')} ${e.getAttribute('data-window')}`));
  assert.deepEqual(windows, ['project 1h', 'project representative', 'account 1h', 'account representative']);
  const gauge = page.locator('.window[data-scope=project][data-window="1h"] .gauge[data-kind=bounce]');
  assert.equal(await gauge.getAttribute('data-level'), 'warn');
  assert.equal(Number(await gauge.getAttribute('data-rate')), 0.03);
  assert.match((await gauge.textContent())!, /3%/);
  // The lines sit where they belong on a scale up to SES's 10% pause: warn 2%, pause 4%, SES review 5%.
  const left = async (line: string) => (await gauge.locator(`[data-line=${line}]`).evaluate((e) => (e as HTMLElement).style.left));
  assert.deepEqual([await left('warn'), await left('pause'), await left('ses-review')], ['20%', '40%', '50%']);
  // Drawn, not just present: the bar has the width of 3% of the track.
  const [bar, track] = await Promise.all([gauge.locator('.gauge-bar').boundingBox(), gauge.locator('.gauge-track').boundingBox()]);
  assert.ok(bar && track && Math.abs(bar.width / track.width - 0.3) < 0.02, `bar ${bar?.width} of ${track?.width}`);

  await ctx.sql`insert into project_reputation (project_id, paused_at, pause_reason) values (${t.projectId}, now(), 'bounce_rate')
    on conflict (project_id) do update set paused_at = now(), pause_reason = 'bounce_rate'`;
  const held = await fetch(`${origin}/v1/emails`, {
    method: 'POST', headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ from: 'a@example.com', to: 'b@example.net', subject: 'Held', text: 'x' }),
  });
  assert.equal(held.status, 201);
  await page.goto(`${origin}/dashboard/projects/${t.projectId}`);
  const banner = page.locator('#paused-banner');
  assert.ok(await banner.isVisible());
  assert.match((await banner.textContent())!, /Sending is paused/);
  assert.match((await banner.textContent())!, /hard-bounce rate/);
  assert.match((await banner.textContent())!, /1 emails held/);
  await page.click('#resume-sending');
  await page.waitForURL(`${origin}/dashboard/projects/${t.projectId}`);
  assert.equal(await page.locator('#paused-banner').count(), 0, 'the banner goes with the pause');
  assert.equal(await page.getAttribute('#reputation', 'data-state'), 'ok', 'the windows start afresh');
  const [row] = await ctx.sql`select paused_at, counting_since from project_reputation where project_id = ${t.projectId}`;
  assert.equal(row!.pausedAt, null);
  assert.ok(row!.countingSince);
  const [job] = await ctx.sql`select count(*)::int as n from graphile_worker.jobs j join emails e on e.id = j.key where e.project_id = ${t.projectId}`;
  assert.equal(job!.n, 1, 'the held email has its job again');
  assert.deepEqual(errors, []);
});
