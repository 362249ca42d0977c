import type { Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import { readJsonBody } from '../http/body.ts';
import { ApiError, ValidationError } from '../http/errors.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { ServiceError } from '../platform/errors.ts';
import { resendPageQuery } from '../resend/paging.ts';
import type { DomainRow, DomainStatus } from './schemas.ts';
import { findDomain, listDomainsPage } from './queries.ts';
import { addDomain, checkDomain, deleteDomain, TrackingDomainRefused, TrackingUnavailable, updateDomainTracking } from './service.ts';
import { normaliseDomainName } from './names.ts';

/**
 * `resend.domains.*` at `/resend/domains`: the project's sending domains through the same service
 * as the CLI and dashboard (SES Easy DKIM, audit entries), in Resend's shapes. What Mailroom has no
 * counterpart for is refused by name: TLS enforcement, switching sending off, and receiving (which
 * needs a bucket: `POST /v1/domains/{id}/receiving`).
 */

/** Resend's record status: Mailroom's vocabulary, with `success` read as `verified`. */
const recordStatus = (s: DomainStatus | null) => (s === 'success' ? 'verified' : s ?? 'not_started');

/**
 * Resend's domain status. DKIM verified with a custom MAIL FROM still pending or failed is
 * `partially_verified` / `partially_failed`; SES's `temporary_failure` (it is re-checking a verified
 * domain) reads as `pending`.
 */
function domainStatus(row: DomainRow) {
  if (row.verificationStatus === 'success') {
    if (row.mailFromStatus === 'failed') return 'partially_failed' as const;
    if (row.mailFromStatus && row.mailFromStatus !== 'success') return 'partially_verified' as const;
    return 'verified' as const;
  }
  if (row.verificationStatus === 'temporary_failure') return 'pending' as const;
  return row.verificationStatus;
}

/** A name as Resend shows it: relative to the domain, the form most DNS hosts ask for. */
const relative = (name: string, domain: string) => (name === domain ? '@' : name.endsWith(`.${domain}`) ? name.slice(0, -domain.length - 1) : name);

function records(row: DomainRow, publicBaseUrl: string | undefined) {
  const out: Record<string, unknown>[] = row.dkimTokens.map((token) => ({
    record: 'DKIM', name: `${token}._domainkey`, type: 'CNAME', ttl: 'Auto', status: recordStatus(row.dkimStatus), value: `${token}.dkim.amazonses.com`,
  }));
  if (row.mailFromDomain) {
    const name = relative(row.mailFromDomain, row.value);
    const status = recordStatus(row.mailFromStatus);
    out.push(
      { record: 'SPF', name, type: 'MX', ttl: 'Auto', status, value: `feedback-smtp.${row.region}.amazonses.com`, priority: 10 },
      { record: 'SPF', name, type: 'TXT', ttl: 'Auto', status, value: '"v=spf1 include:amazonses.com ~all"' },
    );
  }
  if (row.receiving) {
    out.push({
      record: 'Receiving', name: relative(row.receiving.mx.name, row.value), type: 'MX', ttl: 'Auto',
      status: row.receiving.status === 'active' ? 'verified' : 'pending', value: row.receiving.mx.value, priority: row.receiving.mx.priority,
    });
  }
  if (row.trackingDomain) {
    // Mailroom does not look the CNAME up (docs/tracking.md), so its status is never claimed.
    out.push({
      record: 'Tracking', name: relative(row.trackingDomain, row.value), type: 'CNAME', ttl: 'Auto', status: 'not_started',
      value: publicBaseUrl ? new URL(publicBaseUrl).hostname : 'the host this Mailroom is reached at',
    });
  }
  return out;
}

function toResendDomain(row: DomainRow) {
  return {
    id: row.id,
    name: row.value,
    status: domainStatus(row),
    created_at: row.createdAt.toISOString(),
    region: row.region,
    capabilities: { sending: 'enabled' as const, receiving: row.receiving ? 'enabled' as const : 'disabled' as const },
    open_tracking: row.openTracking,
    click_tracking: row.clickTracking,
    // Resend names a label under the domain; a tracking host under another of the project's domains is shown whole.
    tracking_subdomain: row.trackingDomain ? relative(row.trackingDomain, row.value) : null,
  };
}

type Body = Record<string, unknown>;
const invalid = (field: string, msg: string) => new ValidationError([{ loc: ['body', field], msg, type: 'value_error' }]);
const bool = (body: Body, field: string) => {
  const v = body[field];
  if (v !== undefined && v !== null && typeof v !== 'boolean') throw invalid(field, `${field} must be true or false`);
  return v ?? undefined;
};

/** Settings Mailroom cannot honour are refused by name rather than dropped. */
function refuseUnsupported(body: Body, receivingNow: boolean) {
  if (body.tls !== undefined && body.tls !== null && body.tls !== 'opportunistic') {
    throw invalid('tls', 'Mailroom sends with opportunistic TLS (SES\'s default); enforced TLS is not supported');
  }
  const caps = body.capabilities;
  if (caps === undefined || caps === null) return;
  if (typeof caps !== 'object') throw invalid('capabilities', 'capabilities must be an object');
  const { sending, receiving } = caps as { sending?: unknown; receiving?: unknown };
  if (sending !== undefined && sending !== 'enabled') throw invalid('capabilities', 'sending cannot be switched off for a domain; remove the domain instead');
  if (receiving !== undefined && receiving !== (receivingNow ? 'enabled' : 'disabled')) {
    throw invalid('capabilities', 'receiving is switched with POST and DELETE /v1/domains/{id}/receiving, which name the S3 bucket it writes to');
  }
}

const domainId = (value: string | undefined) => {
  if (!value || !isWellFormedId('domain', value)) throw new ApiError('not_found', 'Domain not found.');
  return value;
};

/** The service's refusals as Resend errors. */
function asResendError(err: unknown): never {
  if (err instanceof TrackingDomainRefused) throw invalid('tracking_subdomain', err.message);
  if (err instanceof TrackingUnavailable) throw new ValidationError(err.fields.map((f) => ({ loc: ['body', f], msg: err.message, type: 'tracking_unavailable' })));
  if (!(err instanceof ServiceError)) throw err;
  if (err.code === 'not_found') throw new ApiError('not_found', 'Domain not found.');
  throw new ValidationError([{ loc: ['body'], msg: err.message, type: 'value_error' }]);
}

/** `tracking_subdomain` is a label under the domain (`track`), or a whole host under another of the project's domains. */
function trackingHost(value: unknown, domain: string) {
  if (value === undefined) return undefined;
  if (value === null || value === '') return null;
  if (typeof value !== 'string') throw invalid('tracking_subdomain', 'tracking_subdomain must be a string');
  // A label (`track`) is under this domain; a dotted name is a whole host, checked like /v1's `tracking_domain`.
  const host = value.includes('.') ? value : `${value}.${domain}`;
  try {
    return normaliseDomainName(host, 'tracking domain');
  } catch (err) {
    if (err instanceof ServiceError) throw invalid('tracking_subdomain', err.message);
    throw err;
  }
}

export function registerResendDomainRoutes(app: Hono<AppEnv>) {
  app.post('/domains', async (c) => {
    const { sql, config } = c.var.deps;
    const body = (await readJsonBody(c, 16 * 1024)) as Body;
    if (!body || typeof body !== 'object' || typeof body.name !== 'string') throw invalid('name', 'name is required: the domain to send from');
    refuseUnsupported(body, false);
    // A tracking host must sit under a verified domain (§22.11), which a new domain is not yet.
    if (body.tracking_subdomain) throw invalid('tracking_subdomain', 'a tracking subdomain is set with domains.update once the domain is verified');
    const open = bool(body, 'open_tracking');
    const click = bool(body, 'click_tracking');
    if ((open || click) && !config.publicBaseUrl) {
      throw new ValidationError(['open_tracking', 'click_tracking'].filter((f) => body[f]).map((f) => ({ loc: ['body', f], msg: 'tracking needs PUBLIC_BASE_URL on the server, or a tracking subdomain once the domain is verified', type: 'tracking_unavailable' })));
    }
    const crp = body.custom_return_path;
    if (crp !== undefined && crp !== null && typeof crp !== 'string') throw invalid('custom_return_path', 'custom_return_path must be a string');
    if (body.region !== undefined && body.region !== null && typeof body.region !== 'string') throw invalid('region', 'region must be an AWS region such as us-east-1');
    let row: DomainRow;
    try {
      row = await addDomain(sql, config, c.var.projectId, body.name, { region: (body.region as string | undefined) ?? undefined, mailFrom: crp || undefined });
      if (open !== undefined || click !== undefined) {
        row = await updateDomainTracking(sql, config, c.var.projectId, row.id, { openTracking: open as boolean | undefined, clickTracking: click as boolean | undefined });
      }
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'conflict') throw invalid('name', err.message);
      asResendError(err);
    }
    return c.json({ ...toResendDomain(row), records: records(row, config.publicBaseUrl) }, 200);
  });

  app.get('/domains', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    const { sql } = c.var.deps;
    if (cursor !== undefined && !(isWellFormedId('domain', cursor) && await findDomain(sql, c.var.projectId, cursor))) {
      throw new ApiError('not_found', 'The cursor does not name a domain of this project.');
    }
    const page = await listDomainsPage(sql, c.var.projectId, { limit, after, before });
    return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map(toResendDomain) }, 200);
  });

  app.get('/domains/:id', async (c) => {
    const row = await findDomain(c.var.deps.sql, c.var.projectId, domainId(c.req.param('id')));
    if (!row) throw new ApiError('not_found', 'Domain not found.');
    return c.json({ object: 'domain', ...toResendDomain(row), records: records(row, c.var.deps.config.publicBaseUrl) }, 200);
  });

  app.patch('/domains/:id', async (c) => {
    const { sql, config } = c.var.deps;
    const id = domainId(c.req.param('id'));
    const body = ((await readJsonBody(c, 16 * 1024)) ?? {}) as Body;
    const row = await findDomain(sql, c.var.projectId, id);
    if (!row) throw new ApiError('not_found', 'Domain not found.');
    refuseUnsupported(body, Boolean(row.receiving));
    const change = { openTracking: bool(body, 'open_tracking') as boolean | undefined, clickTracking: bool(body, 'click_tracking') as boolean | undefined, trackingDomain: trackingHost(body.tracking_subdomain, row.value) };
    if (change.openTracking !== undefined || change.clickTracking !== undefined || change.trackingDomain !== undefined) {
      await updateDomainTracking(sql, config, c.var.projectId, id, change).catch(asResendError);
    }
    return c.json({ object: 'domain', id }, 200);
  });

  app.delete('/domains/:id', async (c) => {
    const id = domainId(c.req.param('id'));
    try {
      await deleteDomain(c.var.deps.sql, c.var.projectId, id);
    } catch (err) {
      // Receiving on: its receipt rule would keep writing with no domain left to turn it off from.
      if (err instanceof ServiceError && err.code === 'conflict') throw new ValidationError([{ loc: ['path', 'id'], msg: err.message, type: 'domain_receiving_on' }]);
      asResendError(err);
    }
    return c.json({ object: 'domain', id, deleted: true }, 200);
  });

  /** Asks SES now, as the worker's scheduled check does; the statuses show on the next get. */
  app.post('/domains/:id/verify', async (c) => {
    const id = domainId(c.req.param('id'));
    await checkDomain(c.var.deps.sql, c.var.deps.config, c.var.projectId, id).catch(asResendError);
    return c.json({ object: 'domain', id }, 200);
  });
}
