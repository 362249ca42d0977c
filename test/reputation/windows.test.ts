import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase } from '../helpers/db.ts';
import { createProject } from '../../src/projects/service.ts';

// §19.2: mailroom_reputation() against a reference reading of the same counters, written from the
// rule itself: random hours over 35 days for two projects on one SES account and one on another,
// every metric (the late ones too) over several shards, with and without a resume and its baseline.
// The function reads the hours newest first and stops where the last 10,000 sent recipients begin;
// the reference reads them all.
const { sql } = await createTestDatabase();
const measured = (await createProject(sql, 'measured')).id;
const peer = (await createProject(sql, 'peer')).id;
const other = (await createProject(sql, 'other')).id;
const alone = (await createProject(sql, 'alone')).id;

async function connect(projectId: string, accessKey: string) {
  await sql`
    with account as (
      insert into ses_accounts (region, access_key_digest, max_send_rate, max_24_hour_send, quota_checked_at)
      values ('eu-west-1', sha256(convert_to(${accessKey}, 'UTF8')), 14, 50000, now())
      on conflict (region, access_key_digest) do update set region = excluded.region returning id)
    insert into provider_connections (project_id, region, access_key_id, secret_access_key_encrypted, ses_account_id)
    select ${projectId}, 'eu-west-1', ${accessKey}, ${Buffer.from('unused')}, id from account`;
}
await connect(measured, 'AKIASHARED');
await connect(peer, 'AKIASHARED');
await connect(other, 'AKIAOTHER');

const accountOf = async (projectId: string) => {
  const [row] = await sql<[{ id: string }?]>`select ses_account_id::text as id from provider_connections where project_id = ${projectId}`;
  return row?.id ?? null;
};

type Row = { projectId: string; accountId: string; hour: number; metric: string; shard: number; n: number };
type Counts = { sent: number; bounced: number; complained: number };
type Reading = { scope: string; window: string; sent: number; bounced: number; complained: number; since: number };

const HOUR = 3_600_000;
const METRICS = ['sent', 'bounced', 'complained', 'bounced_late', 'complained_late'];

/** A small deterministic generator, so a failing case can be told again. */
function random(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

/** The windows as §19.2 and migration 000034 define them, over every hour of the counters. */
function reference(rows: Row[], projectId: string, accountId: string | null, nowMs: number, since: number | null, baseline: Record<string, Partial<Counts>> | null): Reading[] {
  const trunc = (ms: number) => Math.floor(ms / HOUR) * HOUR;
  const floor = trunc(nowMs - 30 * 24 * HOUR);
  const hourStart = trunc(nowMs - HOUR);
  const dayStart = trunc(nowMs - 24 * HOUR);
  const from = Math.max(floor, since === null ? -Infinity : trunc(since));
  const resumeHour = since === null ? null : trunc(since);
  const out: Reading[] = [];
  for (const scope of accountId === null ? ['project'] : ['project', 'account']) {
    const hours = new Map<number, Counts>();
    for (const r of rows) {
      if ((scope === 'project' ? r.projectId !== projectId : r.accountId !== accountId) || r.hour < from) continue;
      const h = hours.get(r.hour) ?? { sent: 0, bounced: 0, complained: 0 };
      if (r.metric === 'sent') h.sent += r.n;
      if (r.metric === 'bounced' || (scope === 'account' && r.metric === 'bounced_late' && r.projectId !== projectId)) h.bounced += r.n;
      if (r.metric === 'complained' || (scope === 'account' && r.metric === 'complained_late' && r.projectId !== projectId)) h.complained += r.n;
      hours.set(r.hour, h);
    }
    const adjusted = [...hours].map(([hour, c]) => {
      const off = hour === resumeHour ? baseline?.[scope] ?? {} : {};
      return { hour, sent: Math.max(0, c.sent - (off.sent ?? 0)), bounced: Math.max(0, c.bounced - (off.bounced ?? 0)), complained: Math.max(0, c.complained - (off.complained ?? 0)) };
    }).sort((a, b) => b.hour - a.hour);
    let back = 0;
    let reach: number | null = null;
    for (const a of adjusted) {
      back += a.sent;
      if (back >= 10_000) { reach = a.hour; break; }
    }
    const repStart = Math.max(floor, Math.min(dayStart, reach ?? floor));
    for (const [window, start] of [['1h', hourStart], ['representative', repStart]] as const) {
      const within = adjusted.filter((a) => a.hour >= start);
      const sum = (k: keyof Counts) => within.reduce((n, a) => n + a[k], 0);
      out.push({ scope, window, sent: sum('sent'), bounced: sum('bounced'), complained: sum('complained'), since: Math.max(start, since ?? -Infinity) });
    }
  }
  return out;
}

test('mailroom_reputation() reads what the rule reads: random counters, resumes and baselines, against a reference', async () => {
  const accounts = { measured: await accountOf(measured), peer: await accountOf(peer), other: await accountOf(other) };
  const projects = [[measured, accounts.measured!], [peer, accounts.peer!], [other, accounts.other!]] as const;
  let reached = 0;
  for (let seed = 1; seed <= 24; seed++) {
    const next = random(seed);
    await sql.begin(async (tx) => {
      // One transaction: now() is the same for the rows, the function and the reference.
      const [{ nowMs }] = await tx<[{ nowMs: number }]>`select (extract(epoch from now()) * 1000)::float8 as now_ms`;
      const top = Math.floor(nowMs / HOUR) * HOUR;
      // Busy cases send up to 400 recipients an hour: some reach 10,000 within a day, some in days, some never.
      const busy = next() < 0.6;
      const rows: Row[] = [];
      for (const [projectId, accountId] of projects) {
        for (let h = 0; h < 35 * 24; h++) {
          if (next() > (busy ? 0.9 : 0.3)) continue;
          for (const metric of METRICS) {
            if (metric !== 'sent' && next() > 0.3) continue;
            const shards = 1 + Math.floor(next() * 3);
            for (let shard = 0; shard < shards; shard++) {
              const n = metric === 'sent' ? 1 + Math.floor(next() * (busy ? 140 : 8)) : 1 + Math.floor(next() * 4);
              rows.push({ projectId, accountId, hour: top - h * HOUR, metric, shard, n });
            }
          }
        }
      }
      await tx`delete from reputation_counts`;
      await tx`delete from project_reputation`;
      for (let i = 0; i < rows.length; i += 5000) {
        const chunk = rows.slice(i, i + 5000);
        await tx`
          insert into reputation_counts (project_id, account_id, hour, metric, shard, n)
          select r.p, r.a::bigint, to_timestamp(r.h / 1000.0), r.m, r.s, r.n
          from jsonb_to_recordset(${tx.json(chunk.map((r) => ({ p: r.projectId, a: r.accountId, h: r.hour, m: r.metric, s: r.shard, n: r.n })))})
            as r(p text, a text, h float8, m text, s int, n int)`;
      }
      // A resume in half the cases, anywhere from 40 days ago to now, with a baseline for its hour.
      let since: number | null = null;
      let baseline: Record<string, Partial<Counts>> | null = null;
      if (next() < 0.5) {
        since = Math.round(nowMs - next() * 40 * 24 * HOUR);
        baseline = {
          project: { sent: Math.floor(next() * 100), bounced: Math.floor(next() * 3), complained: Math.floor(next() * 2) },
          account: { sent: Math.floor(next() * 200), bounced: Math.floor(next() * 5), complained: Math.floor(next() * 3) },
        };
        await tx`insert into project_reputation (project_id, counting_since, baseline)
          values (${measured}, to_timestamp(${since} / 1000.0), ${tx.json(baseline)})`;
      }
      for (const [projectId, accountId] of [[measured, accounts.measured], [alone, null]] as const) {
        const got = await tx<Reading[]>`
          select scope, "window", sent::int, bounced::int, complained::int, (extract(epoch from since) * 1000)::float8 as since
          from mailroom_reputation(${projectId})`;
        const want = reference(rows, projectId, accountId, nowMs, projectId === measured ? since : null, projectId === measured ? baseline : null);
        assert.deepEqual(got.map((r) => ({ ...r, since: Math.round(r.since) })), want.map((r) => ({ ...r, since: Math.round(r.since) })), `seed ${seed}, ${projectId === measured ? 'measured' : 'alone'}`);
        if (projectId === measured && want[1]!.since > Math.floor(nowMs / HOUR) * HOUR - 30 * 24 * HOUR && want[1]!.sent >= 10_000) reached++;
      }
    });
  }
  // The stop at 10,000 was exercised, not only the 30 days' end.
  assert.ok(reached >= 5, `cases whose representative window ended at 10,000 sent: ${reached}`);
});
