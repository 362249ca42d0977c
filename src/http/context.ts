import type { KeyPermission } from '../keys/queries.ts';
import type { Redis } from 'ioredis';
import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { SnsFetch } from '../events/sns-fetch.ts';
import type { TemplateRenderer } from '../emails/template-send.ts';

/** Everything a request handler may touch; built once per process by the entry point. */
export type AppDeps = {
  config: Config;
  sql: Sql;
  log: Logger;
  limiter: RateLimiter;
  redis?: Redis;
  /** SNS certificate and confirmation fetches for HTTPS push; the real one when unset. */
  snsFetch?: SnsFetch;
  /** Renders a send's template at accept time (src/templates); wired in by createApp. */
  renderTemplate?: TemplateRenderer;
};

export type AppEnv = {
  Variables: {
    deps: AppDeps;
    requestId: string;
    projectId: string;
    keyId: string;
    /** What the key may do; anything but `full` sees no email's addresses or content. */
    keyPermission: KeyPermission;
  };
};
