import type { Redis } from 'ioredis';
import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import type { RateLimiter } from './rate-limit.ts';

/** Everything a request handler may touch; built once per process by the entry point. */
export type AppDeps = {
  config: Config;
  sql: Sql;
  log: Logger;
  limiter: RateLimiter;
  redis?: Redis;
};

export type AppEnv = {
  Variables: {
    deps: AppDeps;
    requestId: string;
    projectId: string;
    keyId: string;
  };
};
