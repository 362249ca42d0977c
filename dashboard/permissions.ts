import { TrieRouter } from 'hono/router/trie-router';
import type { Role } from '../src/members/roles.ts';
import { BASE } from './env.ts';

/**
 * Authorization is data: which role may take each action, and which action each dashboard route
 * is. `authorize` (authorize.ts) reads both for every signed-in request, forms hide themselves
 * with the same lookup, and test/dashboard/roles.test.ts walks every line. Adding a route is
 * one line in ROUTES.
 */
const EVERYONE = ['owner', 'admin', 'developer', 'viewer'] as const;
const DEVELOPERS = ['owner', 'admin', 'developer'] as const;
const ADMINS = ['owner', 'admin'] as const;

export const PERMISSIONS = {
  /** Every page, read only, and signing out. Never a secret. */
  read: EVERYONE,
  'projects.create': ADMINS,
  'keys.manage': DEVELOPERS,
  'webhooks.manage': DEVELOPERS,
  'webhooks.reveal_secret': DEVELOPERS,
  'domains.manage': DEVELOPERS,
  'templates.manage': DEVELOPERS,
  'suppressions.manage': DEVELOPERS,
  /**
   * Contacts, their segments and topic choices, the project's topics and segments, CSV imports:
   * the data a project's application also manages through the API with any full key.
   */
  'contacts.manage': DEVELOPERS,
  /** Composing, testing, sending, scheduling and canceling broadcasts, as a full key may. */
  'broadcasts.manage': DEVELOPERS,
  'inbox.clear': DEVELOPERS,
  'projects.resume': DEVELOPERS,
  'providers.manage': ADMINS,
  'members.manage': ADMINS,
  /** Inviting an owner, or changing or removing one: checked with members.manage's target. */
  'owners.manage': ['owner'],
  'audit.read': ADMINS,
} as const satisfies Record<string, readonly Role[]>;

export type Action = keyof typeof PERMISSIONS;
type Method = 'GET' | 'POST';

/** Every signed-in dashboard route (paths under /dashboard) and its action. */
export const ROUTES: readonly [Method, string, Action][] = [
  ['POST', '/logout', 'read'],
  ['GET', '/', 'read'],
  ['POST', '/projects', 'projects.create'],
  ['GET', '/team', 'read'],
  ['POST', '/team/invitations', 'members.manage'],
  ['POST', '/team/invitations/:invitationId/withdraw', 'members.manage'],
  ['POST', '/team/:memberId/role', 'members.manage'],
  ['POST', '/team/:memberId/remove', 'members.manage'],
  ['GET', '/audit', 'audit.read'],
  ['GET', '/projects/:projectId', 'read'],
  ['GET', '/projects/:projectId/emails', 'read'],
  ['GET', '/projects/:projectId/emails/:emailId', 'read'],
  ['GET', '/projects/:projectId/inbox', 'read'],
  ['GET', '/projects/:projectId/inbox/live', 'read'],
  ['POST', '/projects/:projectId/inbox/clear', 'inbox.clear'],
  ['GET', '/projects/:projectId/inbox/:messageId', 'read'],
  ['GET', '/projects/:projectId/inbox/:messageId/html', 'read'],
  ['GET', '/projects/:projectId/received', 'read'],
  ['GET', '/projects/:projectId/received/:receivedId', 'read'],
  ['GET', '/projects/:projectId/received/:receivedId/html', 'read'],
  ['GET', '/projects/:projectId/suppressions', 'read'],
  ['POST', '/projects/:projectId/suppressions', 'suppressions.manage'],
  ['POST', '/projects/:projectId/suppressions/lift', 'suppressions.manage'],
  ['GET', '/projects/:projectId/templates', 'read'],
  ['POST', '/projects/:projectId/templates', 'templates.manage'],
  ['GET', '/projects/:projectId/templates/:templateId', 'read'],
  ['POST', '/projects/:projectId/templates/:templateId', 'templates.manage'],
  ['POST', '/projects/:projectId/templates/:templateId/publish', 'templates.manage'],
  ['GET', '/projects/:projectId/templates/:templateId/preview', 'read'],
  ['GET', '/projects/:projectId/contacts', 'read'],
  ['POST', '/projects/:projectId/contacts', 'contacts.manage'],
  ['GET', '/projects/:projectId/contacts/:contactId', 'read'],
  ['POST', '/projects/:projectId/contacts/:contactId', 'contacts.manage'],
  ['POST', '/projects/:projectId/contacts/:contactId/segments', 'contacts.manage'],
  ['POST', '/projects/:projectId/contacts/:contactId/segments/:segmentId/remove', 'contacts.manage'],
  ['POST', '/projects/:projectId/contacts/:contactId/topics', 'contacts.manage'],
  ['POST', '/projects/:projectId/contacts/:contactId/delete', 'contacts.manage'],
  ['POST', '/projects/:projectId/imports', 'contacts.manage'],
  ['GET', '/projects/:projectId/imports/:importId', 'read'],
  ['GET', '/projects/:projectId/imports/:importId/live', 'read'],
  ['GET', '/projects/:projectId/broadcasts', 'read'],
  ['POST', '/projects/:projectId/broadcasts', 'broadcasts.manage'],
  ['GET', '/projects/:projectId/broadcasts/:broadcastId', 'read'],
  ['POST', '/projects/:projectId/broadcasts/:broadcastId', 'broadcasts.manage'],
  ['GET', '/projects/:projectId/broadcasts/:broadcastId/preview', 'read'],
  ['POST', '/projects/:projectId/broadcasts/:broadcastId/test', 'broadcasts.manage'],
  ['POST', '/projects/:projectId/broadcasts/:broadcastId/send', 'broadcasts.manage'],
  ['POST', '/projects/:projectId/broadcasts/:broadcastId/cancel', 'broadcasts.manage'],
  ['GET', '/projects/:projectId/broadcasts/:broadcastId/live', 'read'],
  ['GET', '/projects/:projectId/topics', 'read'],
  ['POST', '/projects/:projectId/topics', 'contacts.manage'],
  ['POST', '/projects/:projectId/topics/:topicId', 'contacts.manage'],
  ['POST', '/projects/:projectId/topics/:topicId/delete', 'contacts.manage'],
  ['GET', '/projects/:projectId/segments', 'read'],
  ['POST', '/projects/:projectId/segments', 'contacts.manage'],
  ['POST', '/projects/:projectId/segments/:segmentId', 'contacts.manage'],
  ['POST', '/projects/:projectId/segments/:segmentId/delete', 'contacts.manage'],
  ['GET', '/projects/:projectId/webhooks', 'read'],
  ['POST', '/projects/:projectId/webhooks', 'webhooks.manage'],
  ['GET', '/projects/:projectId/webhooks/:endpointId', 'read'],
  ['POST', '/projects/:projectId/webhooks/:endpointId/secret', 'webhooks.reveal_secret'],
  ['POST', '/projects/:projectId/webhooks/:endpointId/rotate-secret', 'webhooks.manage'],
  ['POST', '/projects/:projectId/webhooks/:endpointId/url', 'webhooks.manage'],
  ['POST', '/projects/:projectId/webhooks/:endpointId/event-types', 'webhooks.manage'],
  ['POST', '/projects/:projectId/webhooks/:endpointId/enable', 'webhooks.manage'],
  ['POST', '/projects/:projectId/webhooks/:endpointId/disable', 'webhooks.manage'],
  ['POST', '/projects/:projectId/webhooks/:endpointId/delete', 'webhooks.manage'],
  ['GET', '/projects/:projectId/webhooks/:endpointId/deliveries', 'read'],
  ['POST', '/projects/:projectId/webhooks/:endpointId/deliveries/:deliveryId/redeliver', 'webhooks.manage'],
  ['GET', '/projects/:projectId/domains', 'read'],
  ['POST', '/projects/:projectId/domains', 'domains.manage'],
  ['POST', '/projects/:projectId/domains/:domainId/tracking', 'domains.manage'],
  ['POST', '/projects/:projectId/domains/:domainId/check', 'domains.manage'],
  ['POST', '/projects/:projectId/domains/:domainId/delete', 'domains.manage'],
  ['GET', '/projects/:projectId/keys', 'read'],
  ['POST', '/projects/:projectId/keys', 'keys.manage'],
  ['POST', '/projects/:projectId/keys/:keyId/revoke', 'keys.manage'],
  ['POST', '/projects/:projectId/reputation/resume', 'projects.resume'],
];

const router = new TrieRouter<Action>();
for (const [method, path, action] of ROUTES) router.add(method, `${BASE}${path === '/' ? '' : path}`, action);

/**
 * The action a request is. A route missing from ROUTES is read-only for GET and HEAD (its page,
 * or the 404) and owners-only for anything else, so a forgotten line fails closed.
 */
export function actionOf(method: string, path: string): Action | undefined {
  const [matches] = router.match(method === 'HEAD' ? 'GET' : method, path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path);
  return matches[0]?.[0];
}

export function allows(role: Role, action: Action): boolean {
  return (PERMISSIONS[action] as readonly Role[]).includes(role);
}

/** Whether `role` may send `method` to `path`, by the table. */
export function allowsRequest(role: Role, method: string, path: string): boolean {
  const action = actionOf(method, path);
  if (action) return allows(role, action);
  return method === 'GET' || method === 'HEAD' || allows(role, 'owners.manage');
}

/** The roles an action needs, for the refusal page: "the developer role (or admin, owner)". */
export function rolesNeeded(action: Action | undefined): string {
  const roles: readonly Role[] = PERMISSIONS[action ?? 'owners.manage'];
  const least = roles.at(-1)!;
  const others = roles.slice(0, -1).reverse();
  return `the ${least} role${others.length ? ` (or ${others.join(', ')})` : ''}`;
}
