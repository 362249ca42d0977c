import type { Sql, TxSql } from '../platform/db.ts';

/**
 * Recomputes every number kept only to make reads fast from the rows it summarises: the daily
 * event counters per project (from events), the hourly reputation counters (from events and
 * their emails), the tag entries the tag filter reads (from each email's tags) and the recipient
 * entries the `to` filter reads (from each email's to, cc and bcc). One transaction; the counters are locked while it runs, so an event recorded
 * meanwhile waits and is then counted once. Returns how many derived rows were written.
 */
export async function rebuildStats(sql: Sql): Promise<number> {
  return sql.begin(async (tx) => {
    await tx`lock table project_daily_counts in exclusive mode`;
    await tx`delete from project_daily_counts`;
    const counts = await tx`
      insert into project_daily_counts (project_id, day, metric, shard, n)
      select project_id, (created_at at time zone 'UTC')::date, type, 0, count(*)
      from events group by 1, 2, 3`;
    const reputation = await rebuildReputationCounts(tx);
    await tx`lock table email_tags in share row exclusive mode`;
    await tx`
      delete from email_tags t
      where not exists (
        select 1 from emails e
        where e.id = t.email_id and e.project_id = t.project_id
          and e.tags @> jsonb_build_array(jsonb_build_object('name', t.name, 'value', t.value)))`;
    await tx`
      insert into email_tags (project_id, name, value, email_id)
      select e.project_id, x->>'name', x->>'value', e.id
      from emails e cross join lateral jsonb_array_elements(e.tags) x
      where e.tags <> '[]'::jsonb
      on conflict do nothing`;
    await tx`lock table email_recipients in share row exclusive mode`;
    await tx`
      delete from email_recipients r
      where not exists (
        select 1 from emails e
        where e.id = r.email_id and e.project_id = r.project_id
          and r.address in (select mailroom_bare_address(a) from unnest(e.to_addresses || e.cc_addresses || e.bcc_addresses) a))`;
    await tx`
      insert into email_recipients (project_id, address, email_id)
      select e.project_id, mailroom_bare_address(a), e.id
      from emails e cross join lateral unnest(e.to_addresses || e.cc_addresses || e.bcc_addresses) a
      on conflict do nothing`;
    const [kept] = await tx<[{ n: number }]>`select (select count(*) from email_tags)::int + (select count(*) from email_recipients)::int as n`;
    return counts.count + reputation + kept.n;
  });
}

/**
 * The reputation counters (§19.1) of the last 31 days from the events: recipients of each
 * `email.sent` of a project connected to SES, Permanent bounces and complaints per recipient named,
 * each in the hour it was recorded. An email's recipients are all it was addressed to: which of
 * them were suppressed when it left is not kept, so a rebuilt hour may count a few more sent.
 */
async function rebuildReputationCounts(tx: TxSql): Promise<number> {
  await tx`lock table reputation_counts in exclusive mode`;
  await tx`delete from reputation_counts`;
  const rows = await tx`
    insert into reputation_counts (project_id, account_id, hour, metric, shard, n)
    select ev.project_id, pc.ses_account_id, date_trunc('hour', ev.created_at), m.metric, 0, sum(m.n)
    from events ev
    join provider_connections pc on pc.project_id = ev.project_id
    join emails e on e.id = ev.email_id and e.project_id = ev.project_id
    left join project_reputation pr on pr.project_id = ev.project_id
    cross join lateral (select
      case ev.type when 'email.sent' then 'sent' when 'email.bounced' then 'bounced' else 'complained' end as metric,
      case when ev.type = 'email.sent' then cardinality(e.to_addresses) + cardinality(e.cc_addresses) + cardinality(e.bcc_addresses)
           else greatest(1, coalesce(jsonb_array_length(case when jsonb_typeof(ev.data->'to') = 'array' then ev.data->'to' end), 1)) end as n) m
    where ev.created_at > now() - interval '31 days'
      and (ev.type = 'email.sent' or ev.type = 'email.complained' or (ev.type = 'email.bounced' and ev.data->>'bounce_type' = 'permanent'))
      and (ev.type = 'email.sent' or pr.counting_since is null or e.sent_at >= pr.counting_since)
    group by 1, 2, 3, 4`;
  return rows.count;
}
