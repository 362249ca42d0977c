import { serve } from '@hono/node-server';
import type { Server } from 'node:http';
import { ConfigError, loadConfig, type Config, type ConfigDefaults } from './config.ts';
import { createSql, type Sql } from './db.ts';
import { createLogger, type Logger } from './log.ts';
import { createRedis } from './redis.ts';
import { randomUUID } from 'node:crypto';
import { onShutdown, SHUTDOWN_BUDGET_MS } from './shutdown.ts';
import { flushPendingSettles } from '../emails/settle-later.ts';
import { reassertLeases } from '../emails/leases.ts';
import { startMetricsServer } from './metrics.ts';
import { reencodeLegacySecrets } from '../webhooks/secret.ts';
import { createApp } from '../http/app.ts';
import { logOwnerSetup } from '../../dashboard/setup.ts';
import { closeSinkFeeds } from '../sink/live.ts';
import { hitsRecorded } from '../tracking/record.ts';
import { closeMimePool, startMimePool } from './mime-pool.ts';
import { MemoryRateLimiter, RedisRateLimiter, type RateLimiter } from '../http/rate-limit.ts';
import type { WorkerDeps } from '../interfaces.ts';
import type { TaskList } from 'graphile-worker';
import { startIdClock } from './id-clock.ts';

export type Role = 'api' | 'worker' | 'all';

/** Reads the config or exits with the one line that names the bad setting. */
export function configOrExit(defaults?: ConfigDefaults): Config {
  try {
    return loadConfig(process.env, defaults);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`mailroom: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}

/**
 * The worker process's parts: its services (the SMTP sink, SQS polling) and graphile-worker with
 * every task. The returned steps stop jobs before services, since an in-flight send may still be
 * talking to the sink.
 */
export async function startWorkerRole(deps: WorkerDeps, opts: { crontab?: boolean } = {}) {
  const { config, sql, log } = deps;
  // Loaded here, not at the top: an API process never needs graphile-worker, the SMTP sink,
  // or the AWS clients, and doesn't carry them (mailparser lives only in the MIME pool's threads).
  const [{ buildCrontab, buildTaskList, startWorkerServices }, { startWorker }] = await Promise.all([import('../tasks.ts'), import('./worker.ts')]);
  // The sink's catches, inbound mail and relayed bodies are read in the MIME pool: its thread loads
  // the parsers while the rest starts.
  startMimePool();
  // The sink listens before jobs start, so sink-bound sends picked up at boot find it.
  const services = await startWorkerServices(deps);
  // The name this process's email leases carry; it beats as long as the process lives.
  const leases = deps.leases ?? { id: `holder-${randomUUID()}`, busy: new Map<string, string>() };
  deps = { ...deps, leases };
  // Webhook flushes and retries run in a runner of their own: a slow endpoint holds one of
  // WEBHOOK_CONCURRENCY slots for up to its timeout, never a slot a send needs. Each runner takes
  // only the jobs of its own tasks.
  const { webhooks: webhookTasks, others } = splitTasks(buildTaskList(deps));
  const common = { databaseUrl: config.databaseUrl, sql, log, deadAfterSeconds: config.workerDeadAfterSeconds };
  const worker = await startWorker({
    ...common,
    concurrency: config.workerConcurrency,
    taskList: others,
    crontab: opts.crontab === false ? [] : buildCrontab(deps),
    holderId: leases.id,
    beforeFetching: (db) => reassertLeases(db, leases),
  });
  // Webhook flushes hold no email lease, so their runner beats for its pool alone.
  const webhookWorker = await startWorker({ ...common, concurrency: config.webhookConcurrency, taskList: webhookTasks }).catch(async (err: unknown) => {
    await worker.stop();
    throw err;
  });
  // Accepted sends not yet recorded get half the budget to be recorded before the heartbeat stops.
  const steps: Array<[string, () => Promise<unknown>]> = [
    ['pending sends', () => flushPendingSettles(deps, SHUTDOWN_BUDGET_MS / 2)],
    ['worker', () => Promise.all([worker.stop(), webhookWorker.stop()])],
    ...services,
  ];
  return { poolId: worker.poolId, webhookPoolId: webhookWorker.poolId, worker, steps };
}

/** The webhook tasks, named `webhook__…`, apart from every other task. */
function splitTasks(all: TaskList): { webhooks: TaskList; others: TaskList } {
  const webhooks: TaskList = {};
  const others: TaskList = {};
  for (const [name, task] of Object.entries(all)) (name.startsWith('webhook__') ? webhooks : others)[name] = task;
  return { webhooks, others };
}

/**
 * Without autovacuum nothing analyses the tables: a statement's cached plan made while a table
 * was nearly empty is never replaced as it grows, and the job queue's deleted rows are never
 * reclaimed. Said once at start, where an operator looks.
 */
async function warnIfAutovacuumOff(sql: Sql, log: Logger) {
  const [row] = await sql<[{ autovacuum: string }]>`select current_setting('autovacuum') as autovacuum`;
  if (row.autovacuum !== 'on') {
    log.warn({ autovacuum: row.autovacuum }, 'PostgreSQL runs with autovacuum off: query plans and the job queue degrade as tables grow; turn it on');
  }
}

/** How often a worker waiting for migrations says so and looks again. */
const MIGRATION_WAIT_MS = 10_000;
/** Connections of the email list's own pool (AppDeps.historySql): reads of a few ms each. */
const HISTORY_POOL = 4;

/**
 * A worker started against a database whose schema is behind this build (migrations pending, an
 * empty database) waits for it, saying every 10 s what to run, instead of failing on the first
 * query (§18.12). An unreachable database is left to the worker's own start, which waits for it.
 */
async function waitForMigrations(sql: Sql, log: Logger) {
  const { MIGRATE_HINT, schemaState } = await import('./schema-version.ts');
  while ((await schemaState(sql)) === 'behind') {
    log.warn({ hint: MIGRATE_HINT }, `database schema is behind this build (migrations pending): ${MIGRATE_HINT}; waiting`);
    await new Promise((resolve) => setTimeout(resolve, MIGRATION_WAIT_MS));
  }
}

export type Running = {
  config: Config;
  sql: Sql;
  log: Logger;
  url?: string;
  /** The SMTP relay's listeners, when it is on. */
  relay?: Array<{ kind: 'starttls' | 'implicit-tls'; host: string; port: number }>;
  close(): Promise<void>;
};

export async function boot(role: Role, config: Config, finalSteps: Array<[string, () => Promise<unknown>]> = []): Promise<Running> {
  const log = createLogger(config.logLevel, `mailroom-${role}`);
  if (config.migrateOnStart) {
    try {
      const { migrateDatabase } = await import('./migrate.ts');
      const { applied } = await migrateDatabase(config.databaseUrl);
      log.info({ applied }, 'migrations applied');
    } catch (err) {
      log.fatal({ err: (err as Error).message }, 'migration failed; refusing to start');
      process.stderr.write(`mailroom: migration failed: ${(err as Error).message}\n`);
      process.exit(1);
    }
  }

  const sql = createSql(config.databaseUrl, { max: role === 'all' ? 20 : 10, appName: `mailroom-${role}` });
  // Ids (and so the day partitions mail is filed under) follow the database's clock, not this host's.
  const stopIdClock = await startIdClock(sql, log);
  if (config.migrateOnStart) await reencodeLegacySecrets(sql, config);
  const redis = config.redisUrl ? createRedis(config.redisUrl, log) : undefined;
  const limiter: RateLimiter = redis ? new RedisRateLimiter(redis, log) : new MemoryRateLimiter();
  const steps: Array<[string, () => Promise<unknown>]> = [];
  let url: string | undefined;
  let relayListeners: Running['relay'];

  // A few connections of their own for the email list (AppDeps.historySql), beside the main pool.
  const historySql = role === 'worker' ? undefined : createSql(config.databaseUrl, { max: HISTORY_POOL, appName: `mailroom-${role}-history`, genericPlans: true });
  if (role !== 'worker') {
    const app = createApp({ config, sql, historySql, log, limiter, redis });
    const server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, () => resolve(s as Server));
    });
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
    log.info({ url }, 'api listening');
    await logOwnerSetup(sql, config, log, url);
    // Live inbox streams never end on their own, so they are ended first or close would wait on them.
    steps.push(['http', async () => {
      await closeSinkFeeds();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      // Opens and clicks are answered before they are recorded: record those answered before the pool closes.
      await hitsRecorded();
    }]);
    if (config.relay) {
      // Loaded only when on: smtp-server stays out of an API process without it.
      const { startRelay } = await import('../relay/server.ts');
      const relay = await startRelay({ config, sql, log, limiter }).catch((err: unknown) => {
        if (!(err instanceof ConfigError)) throw err;
        process.stderr.write(`mailroom: ${err.message}\n`);
        process.exit(1);
      });
      relayListeners = relay.listeners;
      // First: no new submissions while the rest shuts down; those in flight finish their commit.
      steps.unshift(['relay', relay.close]);
    }
  }

  if (role !== 'api') {
    if (!config.migrateOnStart) await waitForMigrations(sql, log);
    // A worker alone has no API port, so its metrics get their own listener; it binds before any
    // job is taken, so a taken port stops the process before it has work in flight.
    const metrics = role === 'worker'
      ? await startMetricsServer({ host: config.host, port: config.metricsPort, token: config.metricsToken, sql }).catch((err: NodeJS.ErrnoException) => {
        process.stderr.write(`mailroom: METRICS_PORT: ${config.host}:${config.metricsPort} cannot be used (${err.code ?? err.message}); each worker on one host needs its own\n`);
        process.exit(1);
      })
      : undefined;
    const worker = await startWorkerRole({ config, sql, log }).catch((err: unknown) => {
      if (!(err instanceof ConfigError)) throw err;
      process.stderr.write(`mailroom: ${err.message}\n`);
      process.exit(1);
    });
    steps.push(...worker.steps);
    if (metrics) {
      steps.unshift(['metrics', metrics.close]);
      log.info({ port: metrics.port }, 'metrics listening');
    }
    await warnIfAutovacuumOff(sql, log);
    log.info({ concurrency: config.workerConcurrency, webhook_concurrency: config.webhookConcurrency, pool: worker.poolId, webhook_pool: worker.webhookPoolId }, 'worker running');
  }

  // Bounded: after a connection error, postgres.js 3.4.9 keeps the failed query as the connection's
  // current one, and its end() waits for that query for good (porsager/postgres#1097, #1130).
  // The MIME pool's threads end once nothing more can hand them a message.
  steps.push(['mime pool', closeMimePool], ['redis', async () => { redis?.disconnect(); }], ['database', async () => { stopIdClock(); await Promise.all([sql.end({ timeout: 5 }), historySql?.end({ timeout: 5 })]); }], ...finalSteps);
  const close = async () => {
    for (const [, step] of steps) await step().catch(() => {});
  };
  // A database restart or failover is ridden through: postgres.js reconnects, and the worker
  // starts its job runners again in-process (worker.ts), keeping what it holds in memory.
  onShutdown(log, steps);
  return { config, sql, log, url, relay: relayListeners, close };
}
