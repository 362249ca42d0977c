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
  /**
   * The email list's pool: its statements are planned once and the plan kept (plan_cache_mode
   * force_generic_plan), never planned for their values. Each of them names its day partitions
   * by literal bounds, so both plans are the same, but a plan for the values costs planning every
   * partition it spans on each call (14 ms for the days past 63 at 98 days kept, 0.1 ms to run),
   * and PostgreSQL makes five per statement, connection and day before it keeps the generic one.
   * The list reads through `sql` when unset.
   */
  historySql?: Sql;
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
