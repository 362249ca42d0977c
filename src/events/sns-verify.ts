import { createVerify, X509Certificate } from 'node:crypto';
import { z } from 'zod';

/** An SNS HTTP(S) message; only the fields the signature covers, plus the signature's own. */
export const SnsMessage = z.object({
  Type: z.enum(['Notification', 'SubscriptionConfirmation', 'UnsubscribeConfirmation']),
  MessageId: z.string().min(1).max(200),
  TopicArn: z.string().min(1).max(300),
  Message: z.string(),
  Timestamp: z.string().min(1),
  SignatureVersion: z.enum(['1', '2']),
  Signature: z.string().min(1),
  SigningCertURL: z.string().min(1),
  Subject: z.string().nullish(),
  SubscribeURL: z.string().optional(),
  Token: z.string().optional(),
});
export type SnsMessage = z.infer<typeof SnsMessage>;

/** Returns the PEM certificate at an already-validated SigningCertURL. */
export type CertFetcher = (url: string) => Promise<string>;

/** The region of an SNS topic ARN (`arn:aws:sns:REGION:ACCOUNT:NAME`), or undefined. */
export function topicRegion(topicArn: string | undefined): string | undefined {
  const region = topicArn?.split(':')[3];
  return region && /^[a-z]{2}(-[a-z]+)+-\d$/.test(region) ? region : undefined;
}

/**
 * Only the SNS host of the topic's own region may supply the certificate or receive our
 * confirmation; anything else would let a forger sign with a key of their choosing, or make us
 * fetch arbitrary URLs.
 */
export function isSnsUrl(value: string | undefined, opts: { region: string | undefined; pem?: boolean }): boolean {
  if (!value || !opts.region) return false;
  if (!value) return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.protocol !== 'https:' || url.port !== '' || url.username || url.password) return false;
  const host = `sns.${opts.region}.amazonaws.com`;
  if (url.hostname !== host && url.hostname !== `${host}.cn`) return false;
  return !opts.pem || url.pathname.endsWith('.pem');
}

/** The string SNS signs: chosen keys in byte order, each as `Key\nValue\n`. */
export function canonicalString(msg: SnsMessage): string {
  const keys = msg.Type === 'Notification'
    ? ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']
    : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  let out = '';
  for (const key of keys) {
    const value = msg[key as keyof SnsMessage];
    if (value === undefined || value === null) continue; // Subject is signed only when present
    out += `${key}\n${value}\n`;
  }
  return out;
}

/**
 * Checks the message's signature with the certificate at its SigningCertURL: version 1 is
 * SHA1withRSA, version 2 SHA256withRSA. The URL must pass `isSnsUrl` first. A failure to fetch
 * the certificate is thrown, not returned as false, so the caller can log why.
 */
export async function verifySnsSignature(msg: SnsMessage, fetchCert: CertFetcher): Promise<boolean> {
  if (!isSnsUrl(msg.SigningCertURL, { pem: true, region: topicRegion(msg.TopicArn) })) return false;
  const pem = await fetchCert(msg.SigningCertURL);
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(pem);
  } catch {
    return false;
  }
  const now = Date.now();
  if (Date.parse(cert.validFrom) > now || Date.parse(cert.validTo) < now) return false;
  try {
    return createVerify(msg.SignatureVersion === '1' ? 'RSA-SHA1' : 'RSA-SHA256')
      .update(canonicalString(msg), 'utf8')
      .verify(cert.publicKey, msg.Signature, 'base64');
  } catch {
    return false;
  }
}
