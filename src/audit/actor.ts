import { AsyncLocalStorage } from 'node:async_hooks';
import { userInfo } from 'node:os';

/** Who made a change, as an audit entry names them (CONTRACT §21.4). */
export type Actor = {
  type: 'member' | 'api_key' | 'cli' | 'system';
  id: string | null;
  label: string | null;
  /** The client address of a dashboard or API request; null for the CLI and the worker. */
  ip: string | null;
};

export const SYSTEM_ACTOR: Actor = { type: 'system', id: null, label: 'mailroom', ip: null };

/**
 * The actor of the request or command being served. Each way in says who is acting once, where it
 * authenticates (the API's key check, the dashboard's session, the CLI's entry point), and every
 * service function it calls records under that name, as Hono's own contextStorage() carries the
 * request context. Work outside any of them (worker jobs) is the system's.
 */
const scope = new AsyncLocalStorage<Actor>();

export function actingAs<T>(actor: Actor, work: () => T): T {
  return scope.run(actor, work);
}

export function currentActor(): Actor {
  return scope.getStore() ?? SYSTEM_ACTOR;
}

/** The operator at a shell: the OS account that ran the command, which is all the CLI knows. */
export function cliActor(): Actor {
  let user: string | null = null;
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry for the uid (some containers): the entry still says it was the CLI.
  }
  return { type: 'cli', id: user, label: user ? `cli (${user})` : 'cli', ip: null };
}
