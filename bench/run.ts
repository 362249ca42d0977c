import os from 'node:os';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { accept } from './accept.ts';
import { acceptSustained } from './accept-sustained.ts';
import { drain } from './drain.ts';
import { fanout } from './fanout.ts';
import { relay } from './relay.ts';
import { sink } from './sink.ts';
import { scale } from './scale.ts';
import { track } from './track.ts';
import { reputation } from './reputation.ts';
import { inbound } from './inbound.ts';
import { contactsImport } from './contacts-import.ts';
import { broadcast } from './broadcast.ts';
import { freePort, freshDatabase, killChildren, MissingTool, redisAnswers, ROOT, round, SECRET_KEY, spawnService, waitUntil, type BenchContext, type BenchResult, type Service } from './support.ts';

/**
 * `npm run bench [-- accept accept-sustained drain fanout sink relay track inbound broadcast scale reputation contacts-import]`: each benchmark in its
 * own fresh database, one after another, one JSON line each on stdout. Progress goes to stderr.
 */
const BENCHES: Record<string, (ctx: BenchContext) => Promise<BenchResult>> = { accept, 'accept-sustained': acceptSustained, drain, fanout, sink, relay, track, inbound, broadcast, scale, reputation, 'contacts-import': contactsImport };
/** Run only when named: `scale` and `reputation` load a million emails, `scale` for a quarter of an hour. */
const ON_REQUEST = new Set(['scale', 'reputation']);

const names = process.argv.slice(2).filter((a) => a !== '--');
const unknown = names.filter((n) => !(n in BENCHES));
if (unknown.length) {
  process.stderr.write(`bench: unknown benchmark ${unknown.join(', ')}; choose from ${Object.keys(BENCHES).join(', ')}\n`);
  process.exit(2);
}
const selected = names.length ? names : Object.keys(BENCHES).filter((n) => !ON_REQUEST.has(n));
const adminUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

const cleanups: Array<() => Promise<unknown>> = [];
async function cleanUp() {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write(`bench: ${signal}, cleaning up\n`);
    killChildren();
    // Dropping a database under the benchmark's own open pools makes them throw; we are leaving anyway.
    process.on('uncaughtException', () => {});
    process.on('unhandledRejection', () => {});
    const hard = setTimeout(() => process.exit(130), 10_000);
    hard.unref();
    void cleanUp().finally(() => process.exit(130));
  });
}

/** Production requires REDIS_URL: use the one that answers, else start a throwaway redis-server. */
async function redis(): Promise<{ url: string; note: string }> {
  const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  if (await redisAnswers(url)) return { url, note: 'redis' };
  const binary = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find(existsSync);
  if (!binary) return { url, note: 'redis unreachable: the limiter fails open' };
  const port = await freePort();
  const server: Service = spawnService(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']);
  cleanups.push(() => server.stop());
  const own = `redis://127.0.0.1:${port}`;
  await waitUntil('redis-server', () => redisAnswers(own), 10_000);
  return { url: own, note: 'redis (started for the run)' };
}

let failed = false;
/** Each result of this run by name: a later benchmark may state its rate against an earlier one's (broadcast against drain). */
const earlier: Record<string, BenchResult> = {};
// The roles run from the production bundle, so build it from the sources being measured.
execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
try {
  const cache = await redis();
  process.stderr.write(`bench: ${selected.join(', ')} on ${os.cpus().length} CPUs, node ${process.version}, ${cache.note}\n`);
  for (const name of selected) {
    const database = await freshDatabase(adminUrl, name);
    cleanups.push(() => database.drop());
    const ctx: BenchContext = {
      databaseUrl: database.url,
      redisUrl: cache.url,
      env: { DATABASE_URL: database.url, REDIS_URL: cache.url, SECRET_KEY, LOG_LEVEL: 'info', NODE_ENV: 'production' },
      earlier,
    };
    const started = Date.now();
    try {
      process.stderr.write(`bench: ${name}…\n`);
      const result = await BENCHES[name]!(ctx);
      earlier[name] = result;
      process.stdout.write(`${JSON.stringify({ ...result, took_s: round((Date.now() - started) / 1000) })}\n`);
    } catch (err) {
      if (err instanceof MissingTool) {
        // Said, with the package to install, and the run goes on: a tool missing is not a failure.
        process.stderr.write(`bench: ${name} skipped: ${err.message}\n`);
        process.stdout.write(`${JSON.stringify({ bench: name, skipped: err.message, install: `apt-get install ${err.debianPackage}` })}\n`);
        continue;
      }
      failed = true;
      process.stdout.write(`${JSON.stringify({ bench: name, error: (err as Error).message })}\n`);
    } finally {
      await cleanups.pop()!().catch((err) => process.stderr.write(`bench: could not drop ${database.url}: ${err}\n`));
    }
  }
} finally {
  await cleanUp();
}
process.exit(failed ? 1 : 0);
