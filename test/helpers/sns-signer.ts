import { execFileSync } from 'node:child_process';
import { createSign, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { SnsFetch } from '../../src/events/sns-fetch.ts';

export const TEST_CERT_URL = 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem';

/** A key pair and self-signed certificate made by the openssl CLI, standing in for SNS's. */
function generateCertificate(): { keyPem: string; certPem: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'mailroom-sns-'));
  try {
    const keyFile = path.join(dir, 'key.pem');
    const certFile = path.join(dir, 'cert.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile,
      '-days', '2', '-subj', '/CN=sns.amazonaws.com'], { stdio: 'ignore' });
    return { keyPem: readFileSync(keyFile, 'utf8'), certPem: readFileSync(certFile, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

type Fields = Record<string, string>;

/** Written from the SNS documentation independently of src/, so each checks the other. */
function stringToSign(m: Fields): string {
  const keys = m.Type === 'Notification'
    ? ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']
    : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  return keys.filter((k) => m[k] !== undefined).map((k) => `${k}\n${m[k]}\n`).join('');
}

export function createSnsSigner() {
  const { keyPem, certPem } = generateCertificate();
  const certs = new Map<string, string>([[TEST_CERT_URL, certPem]]);

  /** Fills in SignatureVersion, SigningCertURL and Signature. */
  function sign(fields: Fields, opts: { version?: '1' | '2'; certUrl?: string; keyPem?: string } = {}): Fields {
    const version = opts.version ?? '1';
    const signed = { ...fields, SignatureVersion: version, SigningCertURL: opts.certUrl ?? TEST_CERT_URL };
    const signature = createSign(version === '1' ? 'RSA-SHA1' : 'RSA-SHA256').update(stringToSign(signed), 'utf8').sign(opts.keyPem ?? keyPem, 'base64');
    return { ...signed, Signature: signature };
  }

  /** A recording fetcher: serves the test certificate and records confirmations. */
  const fetcher = {
    certRequests: [] as string[],
    confirmed: [] as string[],
    async cert(url: string) {
      fetcher.certRequests.push(url);
      const pem = certs.get(url);
      if (!pem) throw new Error(`no certificate at ${url}`);
      return pem;
    },
    async confirm(url: string) {
      fetcher.confirmed.push(url);
    },
  } satisfies SnsFetch & Record<string, unknown>;

  return {
    certPem,
    keyPem,
    fetcher,
    sign,
    /** Serves another PEM at another (SNS-looking) URL, e.g. a forger's certificate. */
    serveCert(url: string, pem: string) {
      certs.set(url, pem);
    },
    notification(topicArn: string, message: unknown, opts: { messageId?: string; subject?: string; version?: '1' | '2'; certUrl?: string } = {}) {
      return sign({
        Type: 'Notification',
        MessageId: opts.messageId ?? randomUUID(),
        TopicArn: topicArn,
        ...(opts.subject ? { Subject: opts.subject } : {}),
        Message: typeof message === 'string' ? message : JSON.stringify(message),
        Timestamp: new Date().toISOString(),
        UnsubscribeURL: `https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=${topicArn}:sub`,
      }, opts);
    },
    subscriptionConfirmation(topicArn: string, opts: { subscribeUrl?: string; messageId?: string; version?: '1' | '2' } = {}) {
      const token = randomUUID().replace(/-/g, '');
      return sign({
        Type: 'SubscriptionConfirmation',
        MessageId: opts.messageId ?? randomUUID(),
        Token: token,
        TopicArn: topicArn,
        Message: `You have chosen to subscribe to the topic ${topicArn}.`,
        SubscribeURL: opts.subscribeUrl ?? `https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=${topicArn}&Token=${token}`,
        Timestamp: new Date().toISOString(),
      }, opts);
    },
  };
}

export { generateCertificate };
