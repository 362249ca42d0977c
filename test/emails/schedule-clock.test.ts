import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';

// §16.9: the job's time is the stored scheduled_at, whatever this process's clock says.
const ctx = await createTestContext();
const { key } = await ctx.tenant();

const jobRunAt = async (id: string) =>
  (await ctx.sql<{ runAt: Date; scheduledAt: Date | null }[]>`
    select j.run_at, e.scheduled_at from graphile_worker.jobs j join emails e on e.id = j.key
    where j.key = ${id}`)[0]!;

/** Runs `fn` with this process's clock `skewMs` off the database's. */
async function withSkewedClock<T>(skewMs: number, fn: () => Promise<T>): Promise<T> {
  const realNow = Date.now;
  Date.now = () => realNow() + skewMs;
  try {
    return await fn();
  } finally {
    Date.now = realNow;
  }
}

for (const skew of [-3_600_000, 3_600_000]) {
  test(`accept and reschedule with the API's clock ${skew > 0 ? 'ahead' : 'behind'} by an hour: the job runs at the stored scheduled_at`, async () => {
    const dbNow = (await ctx.sql<{ dbNow: Date }[]>`select now() as db_now`)[0]!.dbNow;
    const at = new Date(dbNow.getTime() + 2 * 3_600_000).toISOString();
    const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'ann@example.net', subject: 's', text: 't', scheduled_at: at } });
    assert.equal(res.status, 201);
    const { id } = await res.json() as { id: string };
    let job = await jobRunAt(id);
    assert.equal(job.runAt.getTime(), Date.parse(at));

    const moved = new Date(dbNow.getTime() + 3 * 3_600_000).toISOString();
    const patched = await withSkewedClock(skew, () => ctx.call(key, `/v1/emails/${id}`, { method: 'PATCH', body: { scheduled_at: moved } }));
    assert.equal(patched.status, 200);
    job = await jobRunAt(id);
    assert.equal(job.scheduledAt?.toISOString(), moved);
    assert.equal(job.runAt.getTime(), Date.parse(moved), `job at ${job.runAt.toISOString()}, scheduled ${moved}`);
  });
}
