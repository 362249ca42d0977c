import { deriveKey, hmacSha256Hex, safeEqual } from '../platform/crypto.ts';

export const INTERNAL_SINK_USER = 'mailroom-internal';
const ENVID = /^(proj_[0-9A-HJKMNP-TV-Z]{26}):(email_[0-9A-HJKMNP-TV-Z]{26})$/;

/** Derived once per secret: HKDF then HMAC on every send took about 1% of a draining worker's CPU. */
const loginsBySecret = new Map<string, Readonly<{ user: string; pass: string }>>();

/**
 * The SMTP login of the worker's own connections to the sink. Only holders of SECRET_KEY can
 * compute it (HMAC under a key derived for this purpose alone), and only such a session may say
 * which project and email a message belongs to, so nobody else can forge an email_id link.
 */
export function internalSinkLogin(secretKey: string): Readonly<{ user: string; pass: string }> {
  let login = loginsBySecret.get(secretKey);
  if (!login) {
    login = Object.freeze({ user: INTERNAL_SINK_USER, pass: hmacSha256Hex(deriveKey(secretKey, 'sink-internal'), `${INTERNAL_SINK_USER}:v1`) });
    loginsBySecret.set(secretKey, login);
  }
  return login;
}

export function isInternalSinkLogin(secretKey: string, user: string, pass: string): boolean {
  return user === INTERNAL_SINK_USER && safeEqual(pass, internalSinkLogin(secretKey).pass);
}

/**
 * The DSN envelope id (ENVID, RFC 3461) an internal session puts on MAIL FROM to name the
 * message's project and email. It travels per transaction, so one authenticated connection
 * carries many emails; SMTP allows a single AUTH per connection.
 */
export function internalEnvelopeId(projectId: string, emailId: string): string {
  return `${projectId}:${emailId}`;
}

export function parseInternalEnvelopeId(envid: string | null | undefined): { projectId: string; emailId: string } | undefined {
  const match = envid ? ENVID.exec(envid) : null;
  return match ? { projectId: match[1]!, emailId: match[2]! } : undefined;
}
