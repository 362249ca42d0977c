import type { WorkerDeps } from '../interfaces.ts';
import { getProviderConnection, type ProviderConnection } from './connections.ts';
import { ProviderFailure } from './errors.ts';
import { sendWithSes } from './ses.ts';
import { sendToSink } from './sink-transport.ts';

export type Envelope = { from: string; to: string[]; cc: string[]; bcc: string[]; tags?: { name: string; value: string }[] };

/**
 * `leaveBy` (a `performance.now()` time): a paced send whose request has not left by then is not
 * sent, and fails with SlotMissed, so it can take a later slot.
 */
export type SendOptions = { leaveBy?: number };

/**
 * Where an email goes: SES for a project with a provider connection, the built-in sink for the
 * rest. Both take the composed MIME and answer the id the message is known by.
 */
export type Transport = {
  provider: 'ses' | 'sink';
  /** Whether sends must be spaced to the account's rate (the sink takes anything). */
  paced: boolean;
  send(raw: Buffer, envelope: Envelope, options?: SendOptions): Promise<{ messageId: string }>;
};

/**
 * The one place the transport is chosen. `hasProvider` comes from the claim, so a project that
 * sends to the sink costs no query here.
 */
export async function transportFor(deps: WorkerDeps, projectId: string, emailId: string, hasProvider: boolean): Promise<Transport> {
  const { config, sql } = deps;
  let conn: ProviderConnection | undefined;
  try {
    conn = hasProvider ? await getProviderConnection(sql, config, projectId) : undefined;
  } catch (err) {
    // AES-GCM refuses credentials sealed under another SECRET_KEY; only reconnecting fixes that.
    if ((err as Error).message.includes('unable to authenticate')) {
      throw new ProviderFailure('provider_auth_failed', 'The stored provider credentials cannot be decrypted (SECRET_KEY changed). Reconnect the project.');
    }
    throw err;
  }
  if (conn) {
    const ses = conn;
    return {
      provider: 'ses',
      paced: true,
      send: (raw, e, options) => sendWithSes(config, ses, raw, { to: e.to, cc: e.cc, bcc: e.bcc, tags: e.tags ?? [] }, options?.leaveBy),
    };
  }
  return {
    provider: 'sink',
    paced: false,
    send: (raw, e) => sendToSink(config, { projectId, emailId, from: e.from, recipients: [...e.to, ...e.cc, ...e.bcc], raw }),
  };
}
