import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after } from 'node:test';

/**
 * A small SQS speaking the AWS JSON 1.0 protocol of @aws-sdk/client-sqs v3: POST / with
 * `X-Amz-Target: AmazonSQS.<Operation>` and a JSON body. It implements ReceiveMessage (long
 * poll, visibility timeout), DeleteMessage, DeleteMessageBatch and SendMessage, and records
 * every call so tests can check ordering. Listens on 127.0.0.1, port 0; closed after the file.
 */
type StoredMessage = { messageId: string; body: string; md5: string; visibleAt: number; receiptHandle?: string; receiveCount: number };
type Queue = { name: string; url: string; visibilitySeconds: number; messages: StoredMessage[] };
export type SqsCall = { op: string; at: number; queueUrl?: string; count?: number; messageIds?: string[] };

export type FakeSqs = Awaited<ReturnType<typeof startFakeSqs>>;

export async function startFakeSqs(opts: { closeAfterFile?: boolean } = {}) {
  const queues = new Map<string, Queue>();
  const calls: SqsCall[] = [];
  const deleted: { queueUrl: string; messageId: string; at: number }[] = [];
  const failures = new Map<string, number>();
  const waiters = new Set<() => void>();

  const wake = () => { for (const w of [...waiters]) w(); };

  function receive(queue: Queue, max: number, visibilitySeconds: number) {
    const now = Date.now();
    const out: StoredMessage[] = [];
    for (const m of queue.messages) {
      if (out.length >= max) break;
      if (m.visibleAt > now) continue;
      m.visibleAt = now + visibilitySeconds * 1000;
      m.receiptHandle = randomUUID();
      m.receiveCount++;
      out.push(m);
    }
    return out;
  }

  function removeByHandle(queue: Queue, handle: string): boolean {
    const i = queue.messages.findIndex((m) => m.receiptHandle === handle);
    if (i < 0) return false;
    const [m] = queue.messages.splice(i, 1);
    deleted.push({ queueUrl: queue.url, messageId: m!.messageId, at: Date.now() });
    return true;
  }

  async function handle(op: string, input: Record<string, any>, res: ServerResponse, gone: () => boolean): Promise<[number, unknown]> {
    const queue = queues.get(input.QueueUrl);
    if (!queue) return [400, { __type: 'com.amazonaws.sqs#QueueDoesNotExist', message: 'The specified queue does not exist.' }];
    switch (op) {
      case 'ReceiveMessage': {
        const max = Math.min(10, input.MaxNumberOfMessages ?? 1);
        const visibility = input.VisibilityTimeout ?? queue.visibilitySeconds;
        const deadline = Date.now() + (input.WaitTimeSeconds ?? 0) * 1000;
        let got = receive(queue, max, visibility);
        // Long poll: wait for a send, a message becoming visible again, or the client going away.
        while (!got.length && Date.now() < deadline && !gone()) {
          await new Promise<void>((resolve) => {
            const done = () => { waiters.delete(done); clearTimeout(t); res.off('close', done); resolve(); };
            const t = setTimeout(done, Math.min(100, Math.max(0, deadline - Date.now())));
            waiters.add(done);
            res.on('close', done);
          });
          got = receive(queue, max, visibility);
        }
        calls.push({ op, at: Date.now(), queueUrl: queue.url, count: got.length, messageIds: got.map((m) => m.messageId) });
        if (!got.length) return [200, {}];
        // System attributes only when asked for, as SQS answers; ApproximateReceiveCount is the one kept.
        const asked = [...(input.MessageSystemAttributeNames ?? []), ...(input.AttributeNames ?? [])] as string[];
        const countAsked = asked.includes('All') || asked.includes('ApproximateReceiveCount');
        return [200, { Messages: got.map((m) => ({
          MessageId: m.messageId, ReceiptHandle: m.receiptHandle, MD5OfBody: m.md5, Body: m.body,
          ...(countAsked ? { Attributes: { ApproximateReceiveCount: String(m.receiveCount) } } : {}),
        })) }];
      }
      case 'DeleteMessage': {
        calls.push({ op, at: Date.now(), queueUrl: queue.url, count: 1 });
        if (!removeByHandle(queue, input.ReceiptHandle)) return [400, { __type: 'com.amazonaws.sqs#ReceiptHandleIsInvalid', message: 'The receipt handle is not valid.' }];
        return [200, {}];
      }
      case 'DeleteMessageBatch': {
        const entries = (input.Entries ?? []) as { Id: string; ReceiptHandle: string }[];
        calls.push({ op, at: Date.now(), queueUrl: queue.url, count: entries.length });
        const Successful: { Id: string }[] = [];
        const Failed: { Id: string; SenderFault: boolean; Code: string; Message: string }[] = [];
        for (const e of entries) {
          if (removeByHandle(queue, e.ReceiptHandle)) Successful.push({ Id: e.Id });
          else Failed.push({ Id: e.Id, SenderFault: true, Code: 'ReceiptHandleIsInvalid', Message: 'The receipt handle is not valid.' });
        }
        return [200, { Successful, Failed }];
      }
      case 'SendMessage': {
        const m = api.send(queue.url, String(input.MessageBody));
        return [200, { MessageId: m.messageId, MD5OfMessageBody: m.md5 }];
      }
      default:
        return [400, { __type: 'com.amazonaws.sqs#UnsupportedOperation', message: `${op} is not supported by the fake.` }];
    }
  }

  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    let closed = false;
    res.on('close', () => { closed = true; });
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const target = String(req.headers['x-amz-target'] ?? '');
    const op = target.startsWith('AmazonSQS.') ? target.slice('AmazonSQS.'.length) : '';
    let status: number;
    let payload: unknown;
    const pending = failures.get(op) ?? 0;
    if (req.method !== 'POST' || !op) {
      [status, payload] = [400, { __type: 'com.amazonaws.sqs#InvalidAction', message: 'Expected POST / with X-Amz-Target.' }];
    } else if (pending > 0) {
      failures.set(op, pending - 1);
      calls.push({ op: `${op}:failed`, at: Date.now() });
      [status, payload] = [500, { __type: 'com.amazonaws.sqs#InternalError', message: 'Injected failure.' }];
    } else {
      try {
        [status, payload] = await handle(op, JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}'), res, () => closed);
      } catch (err) {
        [status, payload] = [500, { __type: 'com.amazonaws.sqs#InternalError', message: (err as Error).message }];
      }
    }
    if (closed) return;
    res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': randomUUID() });
    res.end(JSON.stringify(payload));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const api = {
    endpoint,
    calls,
    deleted,
    createQueue(name: string, opts: { visibilitySeconds?: number } = {}) {
      const url = `${endpoint}/000000000000/${name}`;
      queues.set(url, { name, url, visibilitySeconds: opts.visibilitySeconds ?? 30, messages: [] });
      return url;
    },
    send(queueUrl: string, body: string) {
      const queue = queues.get(queueUrl);
      if (!queue) throw new Error(`no queue ${queueUrl}`);
      const m: StoredMessage = { messageId: randomUUID(), body, md5: createHash('md5').update(body).digest('hex'), visibleAt: 0, receiveCount: 0 };
      queue.messages.push(m);
      wake();
      return m;
    },
    /** Messages still in the queue, visible or in flight. */
    remaining(queueUrl: string) {
      return queues.get(queueUrl)?.messages.length ?? 0;
    },
    /** The next `count` calls of `op` answer 500 InternalError. */
    failNext(op: string, count = 1) {
      failures.set(op, count);
    },
    async close() {
      wake();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  // A benchmark process (not a test file) closes it itself.
  if (opts.closeAfterFile !== false) after(() => api.close());
  return api;
}
