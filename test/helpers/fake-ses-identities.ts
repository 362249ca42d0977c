import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenOnLoopback } from './listen.ts';

export type SesStatus = 'PENDING' | 'SUCCESS' | 'FAILED' | 'TEMPORARY_FAILURE' | 'NOT_STARTED';

export type FakeIdentity = {
  name: string;
  region: string;
  tokens: string[];
  verification: SesStatus;
  dkim: SesStatus;
  mailFromDomain?: string;
  mailFrom: SesStatus;
};

export type FakeRequest = { method: string; path: string; region: string; body: unknown };

type Failure = { status: number; type: string; message: string };

/**
 * SES v2's email-identity operations as @aws-sdk/client-sesv2 speaks them (REST-JSON): create,
 * get and the MAIL FROM attribute. Point a config at it with AWS_ENDPOINT_URL_SESV2. Statuses
 * are scripted per identity; errors carry AWS's shape (`x-amzn-ErrorType` header, `message`).
 * Identities live per region, as in SES.
 */
export async function startFakeSesIdentities() {
  const identities = new Map<string, FakeIdentity>();
  const requests: FakeRequest[] = [];
  const failures: Array<{ op: string; failure: Failure }> = [];
  const keyOf = (region: string, name: string) => `${region}/${name}`;

  const fail = (res: ServerResponse, f: Failure) => {
    res.writeHead(f.status, { 'content-type': 'application/json', 'x-amzn-errortype': `${f.type}:http://internal.amazon.com/coral/com.amazonaws.sesv2/` });
    res.end(JSON.stringify({ message: f.message }));
  };
  const send = (res: ServerResponse, body: unknown) => {
    res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-requestid': randomBytes(8).toString('hex') });
    res.end(JSON.stringify(body));
  };
  const dkim = (i: FakeIdentity) => ({ SigningEnabled: true, Status: i.dkim, Tokens: i.tokens, SigningAttributesOrigin: 'AWS_SES' });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const body = text ? JSON.parse(text) : undefined;
    // The region is the SigV4 credential scope: Credential=AKID/DATE/REGION/ses/aws4_request.
    const region = /Credential=[^/]+\/\d+\/([^/]+)\//.exec(req.headers.authorization ?? '')?.[1] ?? 'unknown';
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    requests.push({ method: req.method ?? '', path, region, body });
    const m = /^\/v2\/email\/identities(?:\/([^/]+))?(\/mail-from)?$/.exec(path);
    const op = !m ? '' : req.method === 'POST' && !m[1] ? 'CreateEmailIdentity'
      : req.method === 'GET' && m[1] && !m[2] ? 'GetEmailIdentity'
      : req.method === 'PUT' && m[1] && m[2] ? 'PutEmailIdentityMailFromAttributes' : '';
    if (!op) return fail(res, { status: 404, type: 'UnknownOperationException', message: `no route ${req.method} ${path}` });
    const scripted = failures.findIndex((f) => f.op === op);
    if (scripted >= 0) return fail(res, failures.splice(scripted, 1)[0]!.failure);

    if (op === 'CreateEmailIdentity') {
      const name = String(body.EmailIdentity);
      if (identities.has(keyOf(region, name))) return fail(res, { status: 400, type: 'AlreadyExistsException', message: `Email identity ${name} already exist.` });
      const identity: FakeIdentity = {
        name, region, tokens: [0, 1, 2].map(() => randomBytes(16).toString('hex')), verification: 'PENDING', dkim: 'PENDING', mailFrom: 'NOT_STARTED',
      };
      identities.set(keyOf(region, name), identity);
      return send(res, { IdentityType: 'DOMAIN', VerifiedForSendingStatus: false, DkimAttributes: dkim(identity) });
    }
    const name = decodeURIComponent(m![1]!);
    const identity = identities.get(keyOf(region, name));
    if (!identity) return fail(res, { status: 404, type: 'NotFoundException', message: `Email identity ${name} does not exist.` });
    if (op === 'PutEmailIdentityMailFromAttributes') {
      identity.mailFromDomain = body.MailFromDomain || undefined;
      identity.mailFrom = 'PENDING';
      return send(res, {});
    }
    return send(res, {
      IdentityType: 'DOMAIN',
      FeedbackForwardingStatus: true,
      VerifiedForSendingStatus: identity.verification === 'SUCCESS',
      VerificationStatus: identity.verification,
      DkimAttributes: dkim(identity),
      ...(identity.mailFromDomain
        ? { MailFromAttributes: { MailFromDomain: identity.mailFromDomain, MailFromDomainStatus: identity.mailFrom, BehaviorOnMxFailure: 'USE_DEFAULT_VALUE' } }
        : {}),
      Policies: {},
      Tags: [],
    });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err) => fail(res, { status: 500, type: 'InternalFailure', message: String(err) }));
  });
  const { url, close } = await listenOnLoopback(server);

  return {
    url,
    requests,
    close,
    identity(name: string, region = 'us-east-1') {
      return identities.get(keyOf(region, name));
    },
    /** An identity made outside the service (console, an earlier half-finished add). */
    preexisting(name: string, region = 'us-east-1', patch: Partial<FakeIdentity> = {}) {
      const identity: FakeIdentity = {
        name, region, tokens: [0, 1, 2].map(() => randomBytes(16).toString('hex')), verification: 'PENDING', dkim: 'PENDING', mailFrom: 'NOT_STARTED', ...patch,
      };
      identities.set(keyOf(region, name), identity);
      return identity;
    },
    setStatus(name: string, patch: Partial<Pick<FakeIdentity, 'verification' | 'dkim' | 'mailFrom'>>, region = 'us-east-1') {
      const identity = identities.get(keyOf(region, name));
      if (!identity) throw new Error(`fake SES has no identity ${region}/${name}`);
      Object.assign(identity, patch);
    },
    remove(name: string, region = 'us-east-1') {
      identities.delete(keyOf(region, name));
    },
    /** The next call of `op` answers with this AWS error. */
    failNext(op: string, failure: Failure) {
      failures.push({ op, failure });
    },
  };
}
