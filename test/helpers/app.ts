import { createApp, type App } from '../../src/http/app.ts';
import type { AppDeps } from '../../src/http/context.ts';
import { MemoryRateLimiter, type RateLimiter } from '../../src/http/rate-limit.ts';
import { loadConfig, type Config } from '../../src/platform/config.ts';
import type { Sql } from '../../src/platform/db.ts';
import { createLogger } from '../../src/platform/log.ts';
import { createProject } from '../../src/projects/service.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { createTestDatabase } from './db.ts';

export const TEST_SECRET_KEY = 'test-secret-key-that-is-long-enough-0123456789';

export function testConfig(databaseUrl: string, env: Record<string, string> = {}): Config {
  return loadConfig({ SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent', SINK_SMTP_PORT: '0', ...env, DATABASE_URL: databaseUrl }, { requireRedis: false });
}

export type TestContext = {
  app: App;
  sql: Sql;
  url: string;
  config: Config;
  deps: AppDeps;
  /** A new project with one key. */
  tenant(name?: string): Promise<{ projectId: string; key: string; keyId: string }>;
  /** `app.request` with the key as a bearer token and JSON encoding. */
  call(key: string | undefined, path: string, init?: { method?: string; body?: unknown; headers?: Record<string, string> }): Promise<Response>;
};

/** A cloned database and an in-process app, the way Hono tests itself with `app.request()`. */
export async function createTestContext(opts: { env?: Record<string, string>; limiter?: RateLimiter } = {}): Promise<TestContext> {
  const { url, sql } = await createTestDatabase();
  const config = testConfig(url, opts.env);
  const deps: AppDeps = { config, sql, log: createLogger(process.env.TEST_LOG_LEVEL ?? "silent"), limiter: opts.limiter ?? new MemoryRateLimiter() };
  const app = createApp(deps);
  return {
    app,
    sql,
    url,
    config,
    deps,
    async tenant(name = 'test') {
      const project = await createProject(sql, name);
      const key = await createApiKey(sql, project.id, 'test key');
      return { projectId: project.id, key: key.key, keyId: key.id };
    },
    async call(key, path, init = {}) {
      const headers: Record<string, string> = { ...(init.headers ?? {}) };
      if (key) headers.authorization = `Bearer ${key}`;
      let body: string | undefined;
      if (init.body !== undefined) {
        body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
        headers['content-type'] ??= 'application/json';
      }
      return app.request(path, { method: init.method ?? 'GET', headers, body });
    },
  };
}
