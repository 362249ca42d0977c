import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { createLogger } from '../../src/platform/log.ts';
import { pruneTask } from '../../src/platform/prune.task.ts';
import { newId } from '../../src/platform/ids.ts';

const ctx = await createTestContext();

test('maintenance__prune drops idempotency keys past 24 h, old SNS message ids and expired sessions, keeps fresh ones', async () => {
  const t = await ctx.tenant();
  for (const [key, age] of [['old', '25 hours'], ['fresh', '1 hour']] as const) {
    const id = newId('email');
    await ctx.sql`insert into emails (id, project_id, from_address, to_addresses, subject, text) values (${id}, ${t.projectId}, 'a@x.test', ${['b@x.test']}, 's', 't')`;
    await ctx.sql`insert into idempotency_keys (project_id, idempotency_key, fingerprint, email_id, created_at)
      values (${t.projectId}, ${key}, ${Buffer.alloc(32)}, ${id}, now() - ${age}::interval)`;
  }
  await ctx.sql`insert into sns_messages (message_id, received_at) values ('old', now() - interval '15 days'), ('fresh', now())`;
  await ctx.sql`insert into members (id, email, role, password_hash) values ('usr_prune', 'o@x.test', 'owner', 'x')`;
  await ctx.sql`insert into dashboard_sessions (id, member_id, csrf_secret, expires_at) values
    ('expired', 'usr_prune', 's', now() - interval '1 minute'), ('live', 'usr_prune', 's', now() + interval '1 day')`;
  const run = pruneTask({ sql: ctx.sql, log: createLogger('silent'), config: ctx.config });
  await run({}, {} as never);
  await run({}, {} as never);
  const keys = await ctx.sql`select idempotency_key from idempotency_keys where project_id = ${t.projectId}`;
  assert.deepEqual(keys.map((k) => k.idempotencyKey), ['fresh']);
  const sns = await ctx.sql`select message_id from sns_messages`;
  assert.deepEqual(sns.map((m) => m.messageId), ['fresh']);
  const sessions = await ctx.sql`select id from dashboard_sessions`;
  assert.deepEqual(sessions.map((r) => r.id), ['live']);
});
