import type { Config } from '../platform/config.ts';

/** Where the relay listens, as this process bound it (with port 0, only the listener knows). */
export type RelayListener = { kind: 'starttls' | 'implicit-tls'; host: string; port: number };

let bound: RelayListener[] | undefined;

export function recordRelayListeners(listeners: RelayListener[] | undefined) {
  bound = listeners;
}

/** What an application's SMTP settings page needs, as the dashboard shows it. */
export type RelaySettings = {
  host: string;
  /** The submission port (STARTTLS when the relay has a certificate). */
  port: number;
  /** The implicit TLS port, when on. */
  smtpsPort?: number;
  tls: 'starttls' | 'starttls-and-implicit' | 'none';
  /** Whether AUTH is taken before TLS (development, or RELAY_ALLOW_PLAINTEXT_AUTH). */
  plaintextAuth: boolean;
  username: 'mailroom';
};

const UNSPECIFIED = new Set(['0.0.0.0', '::', '']);

/**
 * The relay's settings for a user, or undefined when it is off. A wildcard listener is shown
 * under the name the user reached the dashboard by (PUBLIC_BASE_URL's, else the request's).
 */
export function relaySettings(config: Config, requestHost: string): RelaySettings | undefined {
  const relay = config.relay;
  if (!relay) return undefined;
  const starttls = bound?.find((l) => l.kind === 'starttls');
  const implicit = bound?.find((l) => l.kind === 'implicit-tls');
  const host = UNSPECIFIED.has(relay.host)
    ? (config.publicBaseUrl ? new URL(config.publicBaseUrl).hostname : requestHost)
    : relay.host;
  const smtpsPort = relay.tls ? implicit?.port ?? relay.smtpsPort : undefined;
  return {
    host,
    port: starttls?.port ?? relay.port,
    smtpsPort,
    tls: !relay.tls ? 'none' : smtpsPort !== undefined ? 'starttls-and-implicit' : 'starttls',
    plaintextAuth: config.development || relay.allowPlaintextAuth,
    username: 'mailroom',
  };
}
