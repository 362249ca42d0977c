import { createServer, type IncomingMessage } from 'node:http';
import { after } from 'node:test';
import { listenOnLoopback } from './listen.ts';

/** One scripted answer: an AWS REST-JSON error, a dropped connection, or success (the default). */
export type FakeSesAnswer =
  | { status: number; type: string; message: string }
  | { drop: true }
  /** Accepts the message (it counts as sent), then resets the connection: the caller's outcome is unknown. */
  | { acceptThenDrop: true }
  | 'ok';

export type SendEmailRequest = {
  ConfigurationSetName?: string;
  Content: { Raw?: { Data: string } };
  Destination?: { ToAddresses?: string[]; CcAddresses?: string[]; BccAddresses?: string[] };
  /** Content.Raw.Data decoded. */
  raw: string;
  authorization: string;
};

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * A protocol-level SES v2 for error paths the emulator cannot produce: it answers
 * `SendEmail` (POST /v2/email/outbound-emails) from a script, the way AWS does, with the
 * status, the `x-amzn-ErrorType` header and a JSON `{message}`. Closed when the file ends
 * (unless `closeAfterFile` is false: a benchmark closes it itself).
 */
export async function startFakeSes(opts: { closeAfterFile?: boolean } = {}) {
  const script: FakeSesAnswer[] = [];
  const requests: SendEmailRequest[] = [];
  /** When each accepted message was accepted (ms), and how many sends were refused as throttled. */
  const accepted: number[] = [];
  /** Its recipients, as SES counts them against the rate and the day: one entry per accepted message. */
  const acceptedRecipients: number[] = [];
  const stats = { throttled: 0, quotaRefused: 0 };
  /** Runs after a message is accepted and before SES answers: a fault injected at that moment. */
  const hooks: {
    beforeAnswer?: (req: SendEmailRequest) => Promise<void>;
    beforeAccount?: () => Promise<void>;
    /** Told of each accepted message with the MessageId it answers: for scripting its later events. */
    accepted?: (req: SendEmailRequest, messageId: string) => void;
  } = {};
  /** What GetAccount says of the account's standing (§19.5). */
  const account: { sendingEnabled: boolean; enforcementStatus: 'HEALTHY' | 'PROBATION' | 'SHUTDOWN' } = { sendingEnabled: true, enforcementStatus: 'HEALTHY' };
  // What GetAccount reports; SendEmail enforces it like SES: more than maxSendRate in any one
  // second is throttled, and past max24HourSend every send is refused.
  const quota = { maxSendRate: 1000, max24HourSend: 1_000_000 };

  let counter = 0;
  const error = (res: import('node:http').ServerResponse, status: number, type: string, message: string) => {
    res.writeHead(status, { 'content-type': 'application/json', 'x-amzn-ErrorType': type, 'x-amzn-RequestId': `req-${++counter}` });
    res.end(JSON.stringify({ message }));
  };
  const server = createServer(async (req, res) => {
    const arrived = Date.now();
    if (req.method === 'GET' && req.url === '/v2/email/account') {
      // A slow GetAccount (a busy machine, a slow AWS API): what a throttle's re-read waits for.
      if (hooks.beforeAccount) await hooks.beforeAccount();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ SendQuota: { MaxSendRate: quota.maxSendRate, Max24HourSend: quota.max24HourSend, SentLast24Hours: accepted.length }, SendingEnabled: account.sendingEnabled, EnforcementStatus: account.enforcementStatus, ProductionAccessEnabled: true }));
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v2/email/outbound-emails') {
      res.writeHead(404, { 'content-type': 'application/json', 'x-amzn-ErrorType': 'UnknownOperationException' });
      res.end(JSON.stringify({ message: 'unknown operation' }));
      return;
    }
    const parsed = JSON.parse(await body(req)) as SendEmailRequest;
    parsed.raw = Buffer.from(parsed.Content.Raw?.Data ?? '', 'base64').toString('utf8');
    parsed.authorization = String(req.headers.authorization ?? '');
    requests.push(parsed);
    const now = arrived;
    const d = parsed.Destination ?? {};
    const recipients = Math.max(1, (d.ToAddresses?.length ?? 0) + (d.CcAddresses?.length ?? 0) + (d.BccAddresses?.length ?? 0));
    const sum = (from: number) => acceptedRecipients.reduce((n, r, i) => (accepted[i]! > from ? n + r : n), 0);
    if (sum(-Infinity) + recipients > quota.max24HourSend) {
      stats.quotaRefused++;
      error(res, 400, 'LimitExceededException', 'Daily message quota exceeded.');
      return;
    }
    // SES counts every recipient against MaxSendRate: more than that in any one second is throttled.
    if (sum(now - 1000) + recipients > quota.maxSendRate) {
      stats.throttled++;
      error(res, 429, 'TooManyRequestsException', 'Maximum sending rate exceeded.');
      return;
    }
    const answer = script.shift() ?? 'ok';
    if (answer === 'ok' || (typeof answer === 'object' && 'acceptThenDrop' in answer)) {
      accepted.push(now);
      acceptedRecipients.push(recipients);
    }
    if (typeof answer === 'object' && 'acceptThenDrop' in answer) {
      req.socket.destroy();
      return;
    }
    if (answer === 'ok') {
      if (hooks.beforeAnswer) await hooks.beforeAnswer(parsed);
      res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-RequestId': `req-${++counter}` });
      const messageId = `fake-ses-${Date.now()}-${counter}`;
      hooks.accepted?.(parsed, messageId);
      res.end(JSON.stringify({ MessageId: messageId }));
    } else if ('drop' in answer) {
      req.socket.destroy();
    } else {
      res.writeHead(answer.status, { 'content-type': 'application/json', 'x-amzn-ErrorType': answer.type, 'x-amzn-RequestId': `req-${++counter}` });
      res.end(JSON.stringify({ message: answer.message }));
    }
  });
  const { url, close } = await listenOnLoopback(server, 'http', opts);
  return {
    url,
    requests,
    accepted,
    acceptedRecipients,
    hooks,
    stats,
    quota,
    account,
    /** The most messages accepted in any one-second window. */
    peakPerSecond() {
      let peak = 0;
      const times = [...accepted].sort((a, b) => a - b);
      for (let i = 0, j = 0; i < times.length; i++) {
        while (times[i]! - times[j]! >= 1000) j++;
        peak = Math.max(peak, i - j + 1);
      }
      return peak;
    },
    /** The most recipients accepted in any one-second window, as SES counts them. */
    peakRecipientsPerSecond() {
      let peak = 0;
      const order = accepted.map((t, i) => [t, acceptedRecipients[i]!] as const).sort((a, b) => a[0] - b[0]);
      for (let i = 0, j = 0, n = 0; i < order.length; i++) {
        n += order[i]![1];
        while (order[i]![0] - order[j]![0] >= 1000) n -= order[j++]![1];
        peak = Math.max(peak, n);
      }
      return peak;
    },
    /** Forgets what was sent and refused, keeping the quota. */
    reset() {
      accepted.length = 0;
      acceptedRecipients.length = 0;
      requests.length = 0;
      stats.throttled = 0;
      stats.quotaRefused = 0;
    },
    /** Queue answers for the next SendEmail calls, in order; after them every call succeeds. */
    answer(...answers: FakeSesAnswer[]) { script.push(...answers); },
    close,
  };
}
