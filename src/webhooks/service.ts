import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import { newId } from '../platform/ids.ts';
import { requireProject } from '../projects/service.ts';
import { ServiceError } from '../platform/errors.ts';
import { checkDestination, destinationPolicy, systemResolver, type Resolver } from './destination.ts';
import { generateSigningSecret, openSecret, sealSecret } from './secret.ts';
import * as q from './queries.ts';
import { auditUrl, recordAudit } from '../audit/record.ts';
import { WEBHOOK_EVENT_TYPES } from '../events/record.ts';

/**
 * An endpoint's event filter from a list of type names (`email.opened`, or `opened` for short).
 * Null, every type, for an empty list or `all`.
 */
export function parseEventTypes(input: string | string[]): string[] | null {
  const names = (Array.isArray(input) ? input : input.split(',')).map((s) => s.trim()).filter(Boolean);
  if (names.length === 0 || (names.length === 1 && names[0] === 'all')) return null;
  const types = names.map((n) => (n.includes('.') ? n : `email.${n}`));
  const unknown = types.filter((t) => !(WEBHOOK_EVENT_TYPES as readonly string[]).includes(t));
  if (unknown.length) throw new ServiceError('invalid_input', `unknown event type ${unknown.join(', ')}; the types are ${WEBHOOK_EVENT_TYPES.join(', ')} (or all)`);
  return WEBHOOK_EVENT_TYPES.filter((t) => types.includes(t));
}

/**
 * Endpoint management, shared by the operator CLI and the dashboard. Failures are
 * `ServiceError`s whose message is fit to show the operator.
 */

export type ServiceOptions = { resolve?: Resolver; eventTypes?: string[] | null };

/** Registers an endpoint. The secret is returned this once; afterwards only the dashboard reveals it. */
export async function createEndpoint(sql: Sql, config: Config, projectId: string, url: string, opts: ServiceOptions = {}) {
  await requireProject(sql, projectId);
  const checked = await checkDestination(url, destinationPolicy(config), opts.resolve ?? systemResolver);
  const secret = generateSigningSecret();
  const endpoint = await sql.begin(async (tx) => {
    const row = await q.insertEndpoint(tx, { id: newId('webhook'), projectId, url: checked, secretSealed: sealSecret(config, secret), eventTypes: opts.eventTypes });
    await recordAudit(tx, {
      action: 'webhook.created', projectId, target: { type: 'webhook', id: row.id },
      changes: { url: auditUrl(row.url), event_types: opts.eventTypes ?? null, enabled: true },
    });
    return row;
  });
  return { endpoint, secret };
}

async function ownerOf(sql: Sql, endpointId: string, projectId?: string) {
  const owner = projectId ?? (await q.findEndpointProject(sql, endpointId));
  if (!owner) throw new ServiceError('not_found', `webhook endpoint ${endpointId} not found`);
  return owner;
}

/**
 * Edits the URL, the event types (null: every type) and/or switches the endpoint on or off. A URL
 * edit clears the failure count and keeps the status. Without `projectId` (the operator CLI) the
 * endpoint's own project is used. A new filter applies to events recorded after it.
 */
export async function updateEndpoint(
  sql: Sql,
  config: Config,
  projectId: string | undefined,
  endpointId: string,
  change: { url?: string; enabled?: boolean; eventTypes?: string[] | null },
  opts: ServiceOptions = {},
) {
  if (change.url === undefined && change.enabled === undefined && change.eventTypes === undefined) {
    throw new ServiceError('invalid_input', 'nothing to change: give a new URL, event types, enable or disable');
  }
  const owner = await ownerOf(sql, endpointId, projectId);
  const url = change.url === undefined ? undefined : await checkDestination(change.url, destinationPolicy(config), opts.resolve ?? systemResolver);
  const row = await sql.begin(async (tx) => {
    const updated = await q.updateEndpoint(tx, owner, endpointId, { url, enabled: change.enabled, eventTypes: change.eventTypes });
    if (updated) {
      await recordAudit(tx, {
        action: 'webhook.updated', projectId: owner, target: { type: 'webhook', id: endpointId },
        changes: { url: auditUrl(url), enabled: change.enabled, event_types: change.eventTypes },
      });
    }
    return updated;
  });
  if (!row) throw new ServiceError('not_found', `webhook endpoint ${endpointId} not found`);
  return row;
}

/**
 * Replaces the signing secret. Every attempt reads the secret when it signs, so the new one signs
 * everything from now on, queued deliveries and retries included, and the old one nothing. The
 * secret is returned this once. Without `projectId` (the operator CLI) the endpoint's own project
 * is used.
 */
export async function rotateEndpointSecret(sql: Sql, config: Config, projectId: string | undefined, endpointId: string) {
  const owner = await ownerOf(sql, endpointId, projectId);
  const secret = generateSigningSecret();
  const endpoint = await sql.begin(async (tx) => {
    const row = await q.replaceSecret(tx, owner, endpointId, sealSecret(config, secret));
    if (row) await recordAudit(tx, { action: 'webhook.secret_rotated', projectId: owner, target: { type: 'webhook', id: endpointId } });
    return row;
  });
  if (!endpoint) throw new ServiceError('not_found', `webhook endpoint ${endpointId} not found`);
  return { endpoint, secret };
}

/**
 * Deletes the endpoint and every delivery of it: queued ones are never posted. Events stay.
 * Not found when it is not the project's, or already deleted.
 */
export async function deleteEndpoint(sql: Sql, projectId: string, endpointId: string) {
  const deleted = await sql.begin(async (tx) => {
    const row = await q.deleteEndpoint(tx, projectId, endpointId);
    if (row) await recordAudit(tx, { action: 'webhook.deleted', projectId, target: { type: 'webhook', id: endpointId }, changes: { url: auditUrl(row.url) } });
    return row;
  });
  if (!deleted) throw new ServiceError('not_found', 'Webhook endpoint not found.');
}

/** The signing secret, for the dashboard's reveal. */
export async function getEndpointSecret(sql: Sql, config: Config, projectId: string, endpointId: string): Promise<string> {
  const sealed = await q.getSealedSecret(sql, projectId, endpointId);
  if (!sealed) throw new ServiceError('not_found', `webhook endpoint ${endpointId} not found`);
  return openSecret(config, sealed);
}

/**
 * Sends a delivery's event to its endpoint again now, as a new delivery (the old one keeps its
 * record). A disabled endpoint is refused: its new delivery would only settle as disabled.
 */
export async function redeliver(sql: Sql, projectId: string, endpointId: string, deliveryId: string) {
  const endpoint = await q.getEndpoint(sql, projectId, endpointId);
  if (!endpoint) throw new ServiceError('not_found', 'Webhook endpoint not found.');
  if (endpoint.status !== 'active') throw new ServiceError('conflict', 'The endpoint is disabled; enable it before redelivering.');
  const delivery = await q.insertRedelivery(sql, projectId, endpointId, deliveryId);
  if (!delivery) throw new ServiceError('not_found', 'Webhook delivery not found.');
  return delivery;
}
