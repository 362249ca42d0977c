import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { insertEmail } from '../sending/fixtures.ts';

const ctx = await createTestContext();
const A = await ctx.tenant('A');
const B = await ctx.tenant('B');

type View = {
  state: string; paused_at: string | null; reason: string | null;
  thresholds: { bounce_rate: { warn: number; pause: number }; complaint_rate: { warn: number; pause: number } };
  windows: { scope: string; window: string; sent: number; bounced: number; complained: number; bounce_rate: number; complaint_rate: number; since: string }[];
  aws: { enforcement_status: string | null; sending_enabled: boolean | null; checked_at: string | null } | null;
};

test('GET /v1/reputation answers the exact shape with the default thresholds', async () => {
  const res = await ctx.call(A.key, '/v1/reputation');
  assert.equal(res.status, 200);
  const body = (await res.json()) as View;
  assert.deepEqual(Object.keys(body).sort(), ['aws', 'paused_at', 'reason', 'state', 'thresholds', 'windows']);
  assert.equal(body.state, 'ok');
  assert.equal(body.paused_at, null);
  assert.equal(body.reason, null);
  assert.deepEqual(body.thresholds, { bounce_rate: { warn: 0.02, pause: 0.04 }, complaint_rate: { warn: 0.0005, pause: 0.0008 } });
  assert.equal(body.aws, null, 'a sink project has no AWS account');
  assert.deepEqual(body.windows.map((w) => [w.scope, w.window]), [['project', '1h'], ['project', 'representative']]);
  for (const w of body.windows) {
    assert.deepEqual(Object.keys(w).sort(), ['bounce_rate', 'bounced', 'complained', 'complaint_rate', 'scope', 'sent', 'since', 'window']);
    assert.equal(w.sent, 0);
    assert.ok(Date.parse(w.since));
  }

  await connectProvider(ctx.sql, ctx.config, { projectId: B.projectId, region: 'eu-west-1', accessKeyId: 'AKIDB', secretAccessKey: 's' });
  const connected = (await (await ctx.call(B.key, '/v1/reputation')).json()) as View;
  assert.deepEqual(connected.windows.map((w) => [w.scope, w.window]),
    [['project', '1h'], ['project', 'representative'], ['account', '1h'], ['account', 'representative']]);
  assert.equal(connected.aws, null, 'no GetAccount reading yet: null, never an object of nulls (§22.9)');
  await ctx.sql`update ses_accounts set enforcement_status = 'HEALTHY', sending_enabled = true, account_checked_at = now()
    where id = (select ses_account_id from provider_connections where project_id = ${B.projectId})`;
  const read = (await (await ctx.call(B.key, '/v1/reputation')).json()) as View;
  assert.equal(read.aws?.enforcement_status, 'HEALTHY');
  assert.equal(read.aws?.sending_enabled, true);
  assert.ok(Date.parse(read.aws?.checked_at ?? ''), 'the reading\'s time');
});

test('PATCH /v1/reputation changes any subset and refuses levels above SES\'s, warn above pause, or below 0', async () => {
  const ok = await ctx.call(A.key, '/v1/reputation', { method: 'PATCH', body: { bounce_rate: { pause: 0.03 } } });
  assert.equal(ok.status, 200);
  assert.deepEqual(((await ok.json()) as View).thresholds.bounce_rate, { warn: 0.02, pause: 0.03 });
  const both = await ctx.call(A.key, '/v1/reputation', { method: 'PATCH', body: { bounce_rate: { warn: 0.01, pause: 0.05 }, complaint_rate: { warn: 0.0001, pause: 0.001 } } });
  assert.equal(both.status, 200, 'exactly SES\'s review levels are allowed');

  const bad: [unknown, unknown[]][] = [
    [{ bounce_rate: { pause: 0.051 } }, ['body', 'bounce_rate', 'pause']],
    [{ complaint_rate: { pause: 0.0011 } }, ['body', 'complaint_rate', 'pause']],
    [{ bounce_rate: { warn: 0.06 } }, ['body', 'bounce_rate', 'warn']],
    [{ complaint_rate: { warn: 0.002, pause: 0.001 } }, ['body', 'complaint_rate', 'warn']],
    [{ bounce_rate: { warn: -0.01 } }, ['body', 'bounce_rate', 'warn']],
    [{ complaint_rate: { pause: -1 } }, ['body', 'complaint_rate', 'pause']],
    [{ bounce_rate: { warn: 'high' } }, ['body', 'bounce_rate', 'warn']],
    [{ bounce: { warn: 0.01 } }, ['body']],
  ];
  for (const [body, loc] of bad) {
    const res = await ctx.call(A.key, '/v1/reputation', { method: 'PATCH', body });
    assert.equal(res.status, 422, JSON.stringify(body));
    const detail = ((await res.json()) as { detail: { loc: unknown[] }[] }).detail;
    assert.deepEqual(detail[0]!.loc.slice(0, loc.length), loc, JSON.stringify(body));
  }
  assert.equal((await ctx.call(A.key, '/v1/reputation', { method: 'PATCH', body: '{"bounce_rate":' })).status, 422);
  const after = (await (await ctx.call(A.key, '/v1/reputation')).json()) as View;
  assert.deepEqual(after.thresholds, { bounce_rate: { warn: 0.01, pause: 0.05 }, complaint_rate: { warn: 0.0001, pause: 0.001 } }, 'a refused patch changes nothing');
  const audit = await ctx.sql`select actor_type, action, changes from audit_log where project_id = ${A.projectId} and action like 'reputation.%' order by id`;
  assert.deepEqual(audit.map((r) => [r.actorType, r.action]), [['api_key', 'reputation.settings_changed'], ['api_key', 'reputation.settings_changed']], 'each change is in the audit log, a refused one is not');
  assert.deepEqual(audit[1]!.changes, { bounce_threshold: [0.01, 0.05], complaint_threshold: [0.0001, 0.001] });
  const other = (await (await ctx.call(B.key, '/v1/reputation')).json()) as View;
  assert.deepEqual(other.thresholds.bounce_rate, { warn: 0.02, pause: 0.04 }, 'another project keeps its own');
});

test('a sending key may not read, change or resume; no key is 401', async () => {
  const sending = await createApiKey(ctx.sql, A.projectId, 'sender', 'sending');
  assert.equal((await ctx.call(sending.key, '/v1/reputation')).status, 403);
  assert.equal((await ctx.call(sending.key, '/v1/reputation', { method: 'PATCH', body: {} })).status, 403);
  assert.equal((await ctx.call(sending.key, '/v1/reputation/resume', { method: 'POST' })).status, 403);
  assert.equal((await ctx.call(undefined, '/v1/reputation')).status, 401);
});

test('a paused project accepts (201 queued) and holds; the resume releases its held mail, scheduled mail that fell due included', async () => {
  const C = await ctx.tenant('C');
  await ctx.sql`insert into project_reputation (project_id, paused_at, pause_reason) values (${C.projectId}, now(), 'bounce_rate')`;
  const paused = (await (await ctx.call(C.key, '/v1/reputation')).json()) as View;
  assert.equal(paused.state, 'paused');
  assert.equal(paused.reason, 'bounce_rate');
  const accepted = await ctx.call(C.key, '/v1/emails', { method: 'POST', body: { from: 'a@example.com', to: 'b@example.net', subject: 'held', text: 'x' } });
  assert.equal(accepted.status, 201);
  const { id } = (await accepted.json()) as { id: string };
  const read = (await (await ctx.call(C.key, `/v1/emails/${id}`)).json()) as { status: string };
  assert.equal(read.status, 'queued');
  const due = await insertEmail(ctx.sql, C.projectId, { subject: 'due' }, false);
  await ctx.sql`update emails set status = 'scheduled', scheduled_at = now() - interval '1 minute' where id = ${due}`;

  const resumed = await ctx.call(C.key, '/v1/reputation/resume', { method: 'POST' });
  assert.equal(resumed.status, 200);
  const view = (await resumed.json()) as View;
  assert.equal(view.state, 'ok');
  assert.equal(view.paused_at, null);
  const jobs = await ctx.sql<{ key: string }[]>`
    select j.key from graphile_worker.jobs j join emails e on e.id = j.key
    where j.task_identifier = 'email__send' and e.project_id = ${C.projectId} order by j.id`;
  assert.deepEqual(jobs.map((j) => j.key), [id, due].sort(), 'every held email has its job again, in id order');
  const [status] = await ctx.sql`select status from emails where id = ${due}`;
  assert.equal(status!.status, 'queued');
  const [state] = await ctx.sql`select counting_since from project_reputation where project_id = ${C.projectId}`;
  assert.ok(state!.countingSince instanceof Date, 'the windows start afresh from the resume');
  assert.equal((await ctx.call(C.key, '/v1/reputation/resume', { method: 'POST' })).status, 200, 'resuming a running project changes nothing');
});

test('the windows: 1h from the previous hour, representative back to the last 10,000 sent recipients or 24 h, never past 30 days; minimums before acting', async () => {
  const D = await ctx.tenant('D');
  await connectProvider(ctx.sql, ctx.config, { projectId: D.projectId, region: 'eu-west-1', accessKeyId: 'AKIDWINDOWS', secretAccessKey: 's' });
  const put = (hoursAgo: number, metric: string, n: number) => ctx.sql`
    insert into reputation_counts (project_id, account_id, hour, metric, shard, n)
    select ${D.projectId}, ses_account_id, date_trunc('hour', now() - make_interval(hours => ${hoursAgo})), ${metric}, ${hoursAgo % 3}, ${n}
    from provider_connections where project_id = ${D.projectId}`;
  await put(0, 'sent', 150);
  await put(0, 'bounced', 10); // 6.7%, but 150 sent is under the hour's 200: no action
  await put(3, 'sent', 350);
  await put(30, 'sent', 20_000);
  await put(30, 'bounced', 100);
  await put(50, 'sent', 5_000);
  await put(40 * 24, 'sent', 1_000_000); // older than 30 days: never read
  await put(40 * 24, 'bounced', 500_000);
  const v = (await (await ctx.call(D.key, '/v1/reputation')).json()) as View;
  const hour = v.windows.find((w) => w.scope === 'project' && w.window === '1h')!;
  const rep = v.windows.find((w) => w.scope === 'project' && w.window === 'representative')!;
  assert.deepEqual([hour.sent, hour.bounced], [150, 10]);
  assert.equal(Date.parse(hour.since), Math.floor((Date.now() - 3_600_000) / 3_600_000) * 3_600_000, 'since the previous hour began');
  // The last 24 h hold 500 sent: the window reaches back to the hour that brings the last 10,000.
  assert.deepEqual([rep.sent, rep.bounced], [20_500, 110]);
  assert.equal(Date.parse(rep.since), Math.floor((Date.now() - 30 * 3_600_000) / 3_600_000) * 3_600_000);
  assert.equal(v.state, 'ok', 'the hour is under its minimum of 200 sent, the representative 0.5% under every threshold');
  assert.equal((await ctx.sql`select paused_at from project_reputation where project_id = ${D.projectId}`).length, 0);
  const ops = await ctx.sql`select scope, "window", sent from ops.reputation where project_id = ${D.projectId} order by scope desc, "window"`;
  assert.deepEqual(ops.map((r) => [r.scope, r.window, Number(r.sent)]), [['project', '1h', 150], ['project', 'representative', 20_500], ['account', '1h', 150], ['account', 'representative', 20_500]]);
});

test('/metrics: mailroom_reputation_rate{project,kind,window} and mailroom_sending_paused{project}, from the same reading', async () => {
  const E = await ctx.tenant('E');
  await connectProvider(ctx.sql, ctx.config, { projectId: E.projectId, region: 'eu-west-1', accessKeyId: 'AKIDMETRICS', secretAccessKey: 's' });
  await ctx.sql`
    insert into reputation_counts (project_id, account_id, hour, metric, shard, n)
    select ${E.projectId}, ses_account_id, date_trunc('hour', now()), m.metric, 0, m.n
    from provider_connections, (values ('sent', 400), ('bounced', 12), ('complained', 1)) m(metric, n) where project_id = ${E.projectId}`;
  await ctx.sql`insert into project_reputation (project_id, paused_at, pause_reason) values (${E.projectId}, now(), 'bounce_rate')`;
  const text = await (await ctx.app.request('/metrics')).text();
  const value = (name: string) => Number(new RegExp(`^${name.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);
  assert.equal(value(`mailroom_reputation_rate{project="${E.projectId}",kind="bounce",window="1h"}`), 0.03);
  assert.equal(value(`mailroom_reputation_rate{project="${E.projectId}",kind="complaint",window="representative"}`), 0.0025);
  assert.equal(value(`mailroom_sending_paused{project="${E.projectId}"}`), 1);
  assert.equal(value(`mailroom_sending_paused{project="${A.projectId}"}`), 0);
});
