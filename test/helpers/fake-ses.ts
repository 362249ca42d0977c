import { createServer, type IncomingMessage } from 'node:http';
import { after } from 'node:test';
import { listenOnLoopback } from './listen.ts';

/** One scripted answer: an AWS REST-JSON error, a dropped connection, or success (the default). */
export type FakeSesAnswer =
  | { status: number; type: string; message: string }
  | { drop: true }
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
 * status, the `x-amzn-ErrorType` header and a JSON `{message}`. Closed when the file ends.
 */
export async function startFakeSes() {
  const script: FakeSesAnswer[] = [];
  const requests: SendEmailRequest[] = [];
  let counter = 0;
  const server = createServer(async (req, res) => {
    if (req.method !== 'POST' || req.url !== '/v2/email/outbound-emails') {
      res.writeHead(404, { 'content-type': 'application/json', 'x-amzn-ErrorType': 'UnknownOperationException' });
      res.end(JSON.stringify({ message: 'unknown operation' }));
      return;
    }
    const parsed = JSON.parse(await body(req)) as SendEmailRequest;
    parsed.raw = Buffer.from(parsed.Content.Raw?.Data ?? '', 'base64').toString('utf8');
    parsed.authorization = String(req.headers.authorization ?? '');
    requests.push(parsed);
    const answer = script.shift() ?? 'ok';
    if (answer === 'ok') {
      res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-RequestId': `req-${++counter}` });
      res.end(JSON.stringify({ MessageId: `fake-ses-${Date.now()}-${counter}` }));
    } else if ('drop' in answer) {
      req.socket.destroy();
    } else {
      res.writeHead(answer.status, { 'content-type': 'application/json', 'x-amzn-ErrorType': answer.type, 'x-amzn-RequestId': `req-${++counter}` });
      res.end(JSON.stringify({ message: answer.message }));
    }
  });
  const { url, close } = await listenOnLoopback(server);
  return {
    url,
    requests,
    /** Queue answers for the next SendEmail calls, in order; after them every call succeeds. */
    answer(...answers: FakeSesAnswer[]) { script.push(...answers); },
    close,
  };
}
