import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import { newId } from '../platform/ids.ts';
import { requireProject } from '../projects/service.ts';
import { ServiceError } from '../platform/errors.ts';
import { getProviderConnection } from '../providers/connections.ts';
import { normaliseDomainName, normaliseMailFrom, normaliseRegion } from './names.ts';
import * as q from './queries.ts';
import { recordAudit } from '../audit/record.ts';
import type { DomainRow } from './schemas.ts';
import type { IdentityState } from './status.ts';

/** The SES client and identity calls, loaded on first use: most API processes never make one. */
async function ses() {
  const [{ sesClientFor }, identity] = await Promise.all([import('../providers/ses-client.ts'), import('./ses-identity.ts')]);
  return { sesClientFor, ...identity };
}

export type AddDomainOptions = { region?: string; mailFrom?: string };

async function requireConnection(sql: Sql, config: Config, projectId: string) {
  const conn = await getProviderConnection(sql, config, projectId);
  if (!conn) throw new ServiceError('not_configured', `project ${projectId} has no SES connection; run \`provider connect\` first (domains are verified with SES)`);
  return conn;
}

/**
 * Registers a sender domain with SES (Easy DKIM) and stores what the customer must publish.
 * Everything is checked before SES is called, and nothing is stored unless SES accepted it.
 * Used by the CLI and the dashboard; a bare string for `opts` is the region.
 */
export async function addDomain(sql: Sql, config: Config, projectId: string, name: string, opts: AddDomainOptions | string = {}): Promise<DomainRow> {
  const options = typeof opts === 'string' ? { region: opts } : opts;
  const value = normaliseDomainName(name);
  const mailFrom = options.mailFrom ? normaliseMailFrom(options.mailFrom, value) : undefined;
  await requireProject(sql, projectId);
  if (await q.domainExists(sql, projectId, value)) throw new ServiceError('conflict', `domain ${value} is already in project ${projectId}`);
  const conn = await requireConnection(sql, config, projectId);
  const region = options.region ? normaliseRegion(options.region) : conn.region;
  const { sesClientFor, createOrAdoptIdentity, putMailFrom } = await ses();
  const client = sesClientFor(config, conn, region);

  const { state, adopted } = await createOrAdoptIdentity(client, value);
  let stored: IdentityState = state;
  if (mailFrom && mailFrom !== state.mailFromDomain) {
    await putMailFrom(client, value, mailFrom);
    // SES starts checking the MX record as soon as the attribute is set.
    stored = { ...state, mailFromDomain: mailFrom, mailFromStatus: 'pending' };
  }
  try {
    // An adopted identity was just read from SES, so it counts as checked.
    return await sql.begin(async (tx) => {
      const row = await q.insertDomain(tx, { id: newId('domain'), projectId, value, region, checked: adopted, ...stored });
      await recordAudit(tx, {
        action: 'domain.created', projectId, target: { type: 'domain', id: row.id },
        changes: { name: value, region, mail_from_domain: stored.mailFromDomain },
      });
      return row;
    });
  } catch (err) {
    if ((err as { code?: string }).code === '23505') throw new ServiceError('conflict', `domain ${value} is already in project ${projectId}`);
    throw err;
  }
}

const FIELDS = [
  ['verification_status', 'verificationStatus'],
  ['dkim_status', 'dkimStatus'],
  ['mail_from_status', 'mailFromStatus'],
] as const;

/**
 * Asks SES about the domain now and stores the statuses and `last_checked_at`; each status
 * that moved is appended to status_history. `projectId` scopes the lookup for callers acting
 * for a project (the dashboard); the operator CLI names only the id.
 */
export async function checkDomain(sql: Sql, config: Config, projectId: string | undefined, domainId: string): Promise<DomainRow> {
  const owner = projectId ?? (await q.findDomainProject(sql, domainId));
  const domain = owner ? await q.findDomain(sql, owner, domainId) : undefined;
  if (!owner || !domain) throw new ServiceError('not_found', `domain ${domainId} not found`);
  const conn = await requireConnection(sql, config, owner);
  const { sesClientFor, getIdentity } = await ses();
  const found = await getIdentity(sesClientFor(config, conn, domain.region), domain.value);
  // SES no longer has the identity (deleted in the console): nothing is being verified.
  const state: IdentityState = found ?? {
    verificationStatus: 'not_started', dkimStatus: null, mailFromStatus: null,
    dkimTokens: domain.dkimTokens, mailFromDomain: domain.mailFromDomain,
  };
  await sql.begin(async (tx) => {
    // The row lock orders two checks of one domain, so each sees the other's result as "from".
    const current = await tx<[DomainRow?]>`
      select verification_status, dkim_status, mail_from_status from domains
      where id = ${domainId} and project_id = ${owner} for update`;
    if (!current[0]) return;
    const at = new Date().toISOString();
    const changes = FIELDS.filter(([, key]) => current[0]![key] !== state[key])
      .map(([field, key]) => ({ at, field, from: current[0]![key], to: state[key] }));
    await q.recordCheck(tx, owner, domainId, state, changes);
  });
  const updated = await q.findDomain(sql, owner, domainId);
  if (!updated) throw new ServiceError('not_found', `domain ${domainId} not found`);
  return updated;
}

export type TrackingSettings = { openTracking?: boolean; clickTracking?: boolean; trackingDomain?: string | null };

/** Which field a refused tracking change names, for the API's `loc`. */
export class TrackingUnavailable extends ServiceError {
  constructor(readonly fields: ('open_tracking' | 'click_tracking')[], domain: string) {
    super('invalid_input', `tracking needs a base for its links: set tracking_domain for ${domain}, or PUBLIC_BASE_URL on the server`);
  }
}

/** A tracking domain outside the project's verified domains, or another project's (§18.11, §22.11). */
export class TrackingDomainRefused extends ServiceError {
  constructor(host: string, refusal: q.TrackingDomainRefusal) {
    super('invalid_input', refusal.why === 'not_own'
      ? `tracking domain ${host} must be a subdomain of one of the project's own domains`
      : refusal.why === 'unverified'
        ? `tracking domain ${host} must be under a verified domain of the project: ${refusal.parent} is ${refusal.status}, not verified`
        : `tracking domain ${host} is used by another project`);
  }
}

/**
 * Switches open and click tracking for mail from the domain, and sets or clears its tracking
 * host (§15.1). Fields not given stay as they are. Switching on with neither a tracking domain
 * nor PUBLIC_BASE_URL is refused. Used by the API, the CLI and the dashboard; without
 * `projectId` (the operator CLI) the domain's own project is used.
 */
export async function updateDomainTracking(sql: Sql, config: Config, projectId: string | undefined, domainId: string, change: TrackingSettings): Promise<DomainRow> {
  if (change.openTracking === undefined && change.clickTracking === undefined && change.trackingDomain === undefined) {
    throw new ServiceError('invalid_input', 'nothing to change: give open tracking, click tracking or a tracking domain');
  }
  const trackingDomain = change.trackingDomain === undefined || change.trackingDomain === null || change.trackingDomain === ''
    ? (change.trackingDomain === '' ? null : change.trackingDomain)
    : normaliseDomainName(change.trackingDomain, 'tracking domain');
  const owner = projectId ?? (await q.findDomainProject(sql, domainId));
  if (!owner) throw new ServiceError('not_found', `domain ${domainId} not found`);
  if (trackingDomain && !(await q.findDomain(sql, owner, domainId))) throw new ServiceError('not_found', `domain ${domainId} not found`);
  const row = await sql.begin(async (tx) => {
    // Open and click tokens answer only on the host they were made for, so that host must be ours alone.
    const refusal = trackingDomain ? await q.trackingDomainRefusal(tx, owner, trackingDomain) : undefined;
    if (refusal) throw new TrackingDomainRefused(trackingDomain!, refusal);
    const updated = await q.updateTracking(tx, owner, domainId, { ...change, trackingDomain }, Boolean(config.publicBaseUrl));
    if (updated) {
      await recordAudit(tx, {
        action: 'domain.updated', projectId: owner, target: { type: 'domain', id: domainId },
        changes: { open_tracking: change.openTracking, click_tracking: change.clickTracking, tracking_domain: trackingDomain },
      });
    }
    return updated;
  });
  if (row) return row;
  const domain = await q.findDomain(sql, owner, domainId);
  if (!domain) throw new ServiceError('not_found', `domain ${domainId} not found`);
  const fields = ([['open_tracking', change.openTracking ?? domain.openTracking], ['click_tracking', change.clickTracking ?? domain.clickTracking]] as const)
    .filter(([, on]) => on).map(([field]) => field);
  throw new TrackingUnavailable(fields.length ? [...fields] : ['open_tracking'], domain.value);
}

/**
 * Forgets the domain in Mailroom. The SES identity in the customer's account is left as it is
 * (the customer may use it elsewhere), and emails already sent from the domain are untouched.
 * Refused (conflict) while receiving is on: its receipt rule would keep writing to the bucket
 * with no domain left to turn it off from.
 */
export async function deleteDomain(sql: Sql, projectId: string, domainId: string) {
  await sql.begin(async (tx) => {
    // The row lock keeps receiving from being switched on between the check and the delete.
    const [row] = await tx<[{ value: string; receiving: unknown }?]>`
      select value, receiving from domains where id = ${domainId} and project_id = ${projectId} for update`;
    if (!row) throw new ServiceError('not_found', 'Domain not found.');
    if (row.receiving) throw new ServiceError('conflict', `Receiving is on for ${row.value}; turn it off first with DELETE /v1/domains/${domainId}/receiving.`);
    await tx`delete from domains where id = ${domainId} and project_id = ${projectId}`;
    await recordAudit(tx, { action: 'domain.deleted', projectId, target: { type: 'domain', id: domainId }, changes: { name: row.value } });
  });
}
