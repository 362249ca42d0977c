/**
 * Types that tie the capabilities together, and nothing else: no code, so any module may import
 * it without an import cycle.
 *
 * Glossary: an *email* is one accepted message; an *attempt* is one try at handing it to its
 * transport; an *event* is a normalised fact about an email; an *endpoint* is a webhook URL with
 * its secret; a *delivery* is one event sent to one endpoint; a *connection* is a project's SES
 * credentials; the *sink* is the built-in SMTP server that catches mail of projects without one.
 */
import type { Config } from './platform/config.ts';
import type { Sql } from './platform/db.ts';
import type { Logger } from './platform/log.ts';
import type { WebhookTransportOverrides } from './webhooks/transport.ts';

/** What every graphile-worker task and worker service is built from. */
export type WorkerDeps = {
  config: Config;
  sql: Sql;
  log: Logger;
  /**
   * Who this worker process's email leases name, with the emails it is working on now. The
   * process heartbeats for it, so a lease it holds stays its own through a database outage.
   */
  leases?: LeaseHolder;
  /** Tests only: an extra trusted CA, a fake resolver, a shorter timeout for webhook delivery. */
  webhooks?: WebhookTransportOverrides;
};

/** A sending domain's tracking switches (§15.1), as the send task reads them with the email. */
export type DomainTracking = { openTracking: boolean; clickTracking: boolean; trackingDomain: string | null };

/** What link and open tracking needs of an email at send time. */
export type TrackableEmail = {
  id: string;
  projectId: string;
  html: string;
  trackOpens: boolean | null;
  trackClicks: boolean | null;
  domainTracking: DomainTracking | null;
};

/**
 * The HTML to send in place of the stored one: tracking's rewrite (src/tracking/), handed to the
 * send task by the task list, so sending does not depend on tracking. Undefined: send as stored.
 * Never throws for the content's sake: HTML it cannot rewrite in time goes untracked.
 */
export type HtmlForSending = (email: TrackableEmail, log: Logger) => Promise<string | undefined>;

/**
 * The name a worker process's leases carry, and the emails it is attempting or has yet to settle
 * (email id to project id), whose leases it re-asserts when it reconnects after an outage.
 */
export type LeaseHolder = { id: string; busy: Map<string, string> };
