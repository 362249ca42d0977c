import type { Sql } from '../platform/db.ts';

/** The outcomes the overview charts, by the event type that records each. */
export const ACTIVITY_SERIES = [
  { key: 'sent', event: 'email.sent' },
  { key: 'delivered', event: 'email.delivered' },
  { key: 'bounced', event: 'email.bounced' },
  { key: 'complained', event: 'email.complained' },
  { key: 'failed', event: 'email.failed' },
  { key: 'opened', event: 'email.opened' },
  { key: 'clicked', event: 'email.clicked' },
] as const;

export type ActivityKey = (typeof ACTIVITY_SERIES)[number]['key'];
export type ActivityDay = { day: string } & Record<ActivityKey, number>;

/**
 * Events per UTC day over the last `days` days, today included, oldest first; days without
 * events are present with zeros, so a chart has one point per day. Read from the project's daily
 * counters (kept with the events, see countEvents): at most a few rows per day, whatever the
 * number of emails.
 */
export async function dailyActivity(sql: Sql, projectId: string, days: number, now = new Date()): Promise<ActivityDay[]> {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const first = new Date(today - (days - 1) * 86_400_000);
  const rows = await sql<{ day: string; type: string; count: number }[]>`
    select to_char(day, 'YYYY-MM-DD') as day, metric as type, sum(n)::int as count
    from project_daily_counts
    where project_id = ${projectId} and day >= ${first.toISOString().slice(0, 10)}::date
      and metric in ${sql(ACTIVITY_SERIES.map((s) => s.event))}
    group by 1, 2`;
  const byDay = new Map<string, ActivityDay>();
  for (let i = 0; i < days; i++) {
    const day = new Date(first.getTime() + i * 86_400_000).toISOString().slice(0, 10);
    byDay.set(day, { day, sent: 0, delivered: 0, bounced: 0, complained: 0, failed: 0, opened: 0, clicked: 0 });
  }
  for (const row of rows) {
    const series = ACTIVITY_SERIES.find((s) => s.event === row.type);
    const entry = byDay.get(row.day);
    if (series && entry) entry[series.key] = row.count;
  }
  return [...byDay.values()];
}

/**
 * How many of the project's emails wait or are on their way now, whatever their age. Read by
 * mailroom_inflight_counts from the partitions that can hold them (those the worker's sweep found
 * holding unsent mail, and the last hours'), so neither the days kept nor the mail sent changes
 * its cost; with no recent sweep it reads every partition.
 */
export async function inFlightCounts(sql: Sql, projectId: string): Promise<Record<'scheduled' | 'queued' | 'sending', number>> {
  const rows = await sql<{ status: 'scheduled' | 'queued' | 'sending'; count: number }[]>`
    select status, emails::int as count from mailroom_inflight_counts(${projectId})`;
  const counts = { scheduled: 0, queued: 0, sending: 0 };
  for (const row of rows) counts[row.status] = row.count;
  return counts;
}

export type ProviderPacing = {
  region: string;
  accountMaxSendRate: number | null;
  rateCap: number | null;
  sendRate: number;
  slowed: boolean;
  max24HourSend: number | null;
  sentLast24h: number;
  throttlesLastHour: number;
  quotaCheckedAt: Date | null;
};

/** The project's SES pacing and quota as `ops.providers` shows them, or undefined for a sink project. */
export async function providerPacing(sql: Sql, projectId: string): Promise<ProviderPacing | undefined> {
  const [row] = await sql<[ProviderPacing?]>`
    select region, account_max_send_rate, rate_cap, send_rate, slowed, max_24_hour_send,
           sent_last_24h::int as sent_last_24h, throttles_last_hour::int as throttles_last_hour, quota_checked_at
    from ops.providers where project_id = ${projectId}`;
  return row;
}
