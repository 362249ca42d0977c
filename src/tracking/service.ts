import type { HtmlForSending, TrackableEmail, WorkerDeps } from '../interfaces.ts';
import type { Config } from '../platform/config.ts';
import { rewriteHtml } from './rewrite.ts';
import { signTrackingToken } from './token.ts';
import { storeTrackedLinks } from './queries.ts';

/**
 * Where an email's tracked links and pixel point: the sender domain's tracking host (served over
 * HTTPS by the user's proxy), else PUBLIC_BASE_URL; undefined when neither is set.
 */
export function trackingBase(config: Config, email: Pick<TrackableEmail, 'domainTracking'>): string | undefined {
  const host = email.domainTracking?.trackingDomain;
  return host ? `https://${host}` : config.publicBaseUrl;
}

/** The email's own switches win; otherwise its sender domain's; otherwise off. */
export function trackingSwitches(email: TrackableEmail) {
  return {
    opens: email.trackOpens ?? email.domainTracking?.openTracking ?? false,
    clicks: email.trackClicks ?? email.domainTracking?.clickTracking ?? false,
  };
}

/**
 * The send task's view of tracking: the HTML with its links rewritten and the pixel added, as the
 * switches say, after storing the links' original URLs with the email (a click can come as soon
 * as the message is out). Undefined (send the stored HTML) when tracking is off for the email or
 * the HTML cannot be rewritten in bounded time; the reason is logged, and the send goes on.
 */
export function htmlForSending(deps: Pick<WorkerDeps, 'config' | 'sql'>): HtmlForSending {
  const { config, sql } = deps;
  return async (email, log) => {
    const { opens, clicks } = trackingSwitches(email);
    if (!opens && !clicks) return undefined;
    const base = trackingBase(config, email);
    if (!base) {
      log.warn({ reason: 'no_tracking_base' }, 'email sent untracked: neither the domain\'s tracking_domain nor PUBLIC_BASE_URL is set');
      return undefined;
    }
    const target = { projectId: email.projectId, emailId: email.id };
    // Each token answers only on the host its link points at.
    const host = new URL(base).host;
    // Mailroom's own unsubscribe link must work as sent, and must not count as a click.
    const unsubscribe = [config.publicBaseUrl, base].filter(Boolean).map((b) => `${b}/unsubscribe/`);
    const result = await rewriteHtml(email.html, {
      clickUrl: clicks ? (link) => `${base}/t/c/${signTrackingToken(config.secretKey, 'click', { ...target, link }, host)}` : undefined,
      openUrl: opens ? `${base}/t/o/${signTrackingToken(config.secretKey, 'open', { ...target, link: 0 }, host)}` : undefined,
      exempt: (url) => unsubscribe.some((prefix) => url.startsWith(prefix)),
    });
    if ('untracked' in result) {
      log.warn({ reason: result.untracked, htmlChars: email.html.length }, 'email sent untracked: its HTML could not be rewritten in bounded time');
      return undefined;
    }
    if (result.links.length) await storeTrackedLinks(sql, email.projectId, email.id, result.links);
    return result.html;
  };
}
