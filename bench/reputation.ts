import { createSql, type Sql } from '../src/platform/db.ts';
import { newId } from '../src/platform/ids.ts';
import { insertQueuedEmails } from '../src/emails/queries.ts';
import { recordEventsStatement, type EmailEvent } from '../src/events/record.ts';
import { LARGE, load, setUp, timeRoute } from './scale.ts';
import { QUICK, round, spawnRole, type BenchContext, type BenchResult, type Service } from './support.ts';

/**
 * `npm run bench -- reputation` (CONTRACT §19, issue 40):
 *
 * 1. What the guardrail's counters cost where they live. Accepting an email (POST /v1/emails)
 *    touches no counter and reads no pause, so the cost is measured on an email's whole database
 *    life: its accept statement (insertQueuedEmails, the route's one statement) and the statement
 *    that records it sent (markSent's: the status, the `email.sent` event, its daily and now its
 *    reputation counters). CONNECTIONS loops run that pair for ROUND_SECONDS with the counters on
 *    (the `email.sent` event carries its recipients for the counters, as the send task's does)
 *    and off (the same event without), alternating, five rounds each; `ratio` is the median of
 *    the rounds' on/off throughput.
 * 2. GET /v1/reputation through the production API over the `scale` load of 1 million emails
 *    (bench/scale.ts, whose measured project is connected to SES), its counters made by
 *    `stats rebuild` as the load ends: `read_p50_ms`.
 *
 * Prints one line: {"bench":"reputation","ratio":…,"read_p50_ms":…}.
 */
const CONNECTIONS = 8;
const ROUND_SECONDS = QUICK ? 1 : 3;
const ROUNDS = 5;

async function lifecycles(sql: Sql, projectId: string, counters: boolean): Promise<number> {
  const until = performance.now() + ROUND_SECONDS * 1000;
  let done = 0;
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (performance.now() < until) {
      const id = newId('email');
      await insertQueuedEmails(sql, [{
        id, projectId, from: 'Bench <bench@example.com>', to: ['reader@example.com'], cc: [], bcc: [], replyTo: [],
        subject: 'Your receipt', html: null, text: 'Thanks for your order.', headers: {}, attachments: [],
      }]);
      const event: EmailEvent = {
        type: 'email.sent', data: { to: ['reader@example.com'], provider_message_id: `bench-${id}` },
        ...(counters ? { reputation: { metric: 'sent', n: 1 } } : {}),
      };
      await recordEventsStatement(sql, sql`
        update emails set status = 'sent', sent_at = now(), provider_message_id = ${`bench-${id}`}, updated_at = now()
        where id = ${id} and project_id = ${projectId}
        returning id, project_id, tags`, [event]);
      done++;
    }
  }));
  return done / ROUND_SECONDS;
}

export async function reputation(ctx: BenchContext): Promise<BenchResult> {
  const sql = createSql(ctx.databaseUrl, { max: CONNECTIONS + 2, appName: 'bench-reputation' });
  const services: Service[] = [];
  try {
    const s = await setUp(sql);
    const measured = s.projects[0]!;
    // The emails the rounds make are graphile-worker jobs too; no worker runs, so they wait, as in the accept bench.
    const on: number[] = [];
    const off: number[] = [];
    await lifecycles(sql, measured, true); // warm-up
    for (let r = 0; r < ROUNDS; r++) {
      on.push(await lifecycles(sql, measured, true));
      off.push(await lifecycles(sql, measured, false));
    }
    const ratios = on.map((x, i) => x / off[i]!).sort((a, b) => a - b);
    process.stderr.write(`bench: reputation: email lifecycles/s with counters ${on.map((x) => round(x)).join(', ')}; without ${off.map((x) => round(x)).join(', ')}\n`);
    await sql`delete from emails where project_id = ${measured}`;

    const api = spawnRole('api', { ...ctx.env, HOST: '127.0.0.1', PORT: '0', API_RATE_LIMIT_PER_MINUTE: '1000000', LOG_LEVEL: 'info' });
    services.push(api);
    const { url } = await api.logLine('api listening') as { url: string };
    const started = Date.now();
    await load(sql, s, 'all');
    const loadS = round((Date.now() - started) / 1000);
    const auth = { authorization: `Bearer ${s.key}` };
    const readP50 = await timeRoute(`${url}/v1/reputation`, auth);
    // What any authenticated read costs on this machine now (HTTP, the key, the rate limit), for scale.
    const baselineP50 = await timeRoute(`${url}/v1/domains`, auth);
    const sqlTimes: number[] = [];
    for (let i = 0; i < 45; i++) {
      const t = performance.now();
      await sql`select * from mailroom_reputation(${measured})`;
      if (i >= 5) sqlTimes.push(performance.now() - t);
    }
    sqlTimes.sort((a, b) => a - b);
    const [rows] = await sql<[{ n: number }]>`select count(*)::int as n from reputation_counts where project_id = ${measured}`;
    const t0 = performance.now();
    await sql`select * from ops.reputation`;
    const opsMs = performance.now() - t0;
    return {
      bench: 'reputation',
      ratio: round(ratios[Math.floor(ratios.length / 2)]!, 3),
      read_p50_ms: round(readP50, 2),
      baseline_route_p50_ms: round(baselineP50, 2),
      read_sql_median_ms: round(sqlTimes[Math.floor(sqlTimes.length / 2)]!, 2),
      lifecycles_per_s_with: round(on.reduce((a, b) => a + b, 0) / on.length),
      lifecycles_per_s_without: round(off.reduce((a, b) => a + b, 0) / off.length),
      emails_loaded: LARGE,
      load_s: loadS,
      counter_rows_read: rows.n,
      ops_reputation_ms: round(opsMs, 2),
    };
  } finally {
    for (const service of services.reverse()) await service.stop();
    await sql.end({ timeout: 2 });
  }
}
