import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { runCli } from '../helpers/process.ts';
import { generatedCsv, seedProject } from './imports-fixtures.ts';

const ctx = await createTestContext();
const worker = await startTestWorker(ctx.config, ctx.sql);
after(() => worker.stop());
const env = { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent' };
const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-import-'));

test('contacts import without a terminal prints a JSON line per progress update, then the finished import', async () => {
  const { projectId } = await ctx.tenant();
  const { segmentId } = await seedProject(ctx.sql, projectId);
  const file = path.join(dir, 'contacts.csv');
  await writeFile(file, `${generatedCsv(20_000)}not-an-address,x,y,free\n`);
  const run = await runCli(['contacts', 'import', file, '--project', projectId, '--segment', segmentId], env);
  assert.equal(run.code, 0, run.stderr);
  const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: string; status: string; counts: { total: number }; progress: { bytes_done: number; bytes_total: number } });
  assert.ok(lines.length >= 2, run.stdout);
  const final = lines.at(-1)!;
  const progress = lines.slice(0, -1);
  assert.ok(progress.every((l) => l.id === final.id && ['queued', 'in_progress'].includes(l.status) && l.progress.bytes_total > 0), run.stdout);
  for (let i = 1; i < progress.length; i++) assert.ok(progress[i]!.counts.total >= progress[i - 1]!.counts.total);
  assert.equal(final.status, 'completed');
  assert.deepEqual(final.counts, { total: 20_001, created: 20_000, updated: 0, skipped: 0, failed: 1 });
  assert.deepEqual((final as unknown as { errors: unknown }).errors, [{ line: 20_002, reason: 'email "not-an-address" is not a valid address' }]);
  const [m] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from contact_segments where segment_id = ${segmentId}`;
  assert.equal(m.n, 20_000);
});

test('contacts import failures: one line on stderr and exit 1', async () => {
  const { projectId } = await ctx.tenant();
  const broken = path.join(dir, 'broken.csv');
  await writeFile(broken, 'email\na@example.com\n"b@example.com\n');
  const failed = await runCli(['contacts', 'import', broken, '--project', projectId], env);
  assert.equal(failed.code, 1);
  assert.match(failed.stderr, /^mailroom: import cimp_\w+ failed: line 3: Quote Not Closed.*\n$/);

  const noEmail = path.join(dir, 'no-email.csv');
  await writeFile(noEmail, 'name\nAnn\n');
  const refused = await runCli(['contacts', 'import', noEmail, '--project', projectId], env);
  assert.equal(refused.code, 1);
  assert.equal(refused.stderr, 'mailroom: column_map.email: the file has no email column; name it in column_map.email\n');
  assert.equal(refused.stdout, '');

  const missing = await runCli(['contacts', 'import', path.join(dir, 'absent.csv'), '--project', projectId], env);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^mailroom: cannot read .*absent\.csv \(ENOENT\)\n$/);
  const noProject = await runCli(['contacts', 'import', noEmail, '--project', 'proj_01M8SF7C8VQN1YZXM9J46H435Q'], env);
  assert.equal(noProject.code, 1);
  assert.match(noProject.stderr, /project proj_01M8SF7C8VQN1YZXM9J46H435Q not found/);
});
