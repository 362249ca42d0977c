import { after } from 'node:test';
import net from 'node:net';
import nodemailer from 'nodemailer';
import { createLogger } from '../../src/platform/log.ts';
import { startSinkServer } from '../../src/sink/server.ts';
import type { TestContext } from '../helpers/app.ts';

/** The sink on an ephemeral loopback port, stopped after the file. */
export async function startSink(ctx: TestContext) {
  const sink = await startSinkServer({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
  after(() => sink.close());
  return sink;
}

/** A plain SMTP client the way an application would configure one. */
export function smtpClient(port: number, auth?: { user: string; pass: string }, authMethod?: 'PLAIN' | 'LOGIN') {
  return nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, auth, authMethod, ignoreTLS: true });
}

/** The sink message id from a `250 OK: queued as msg_…` reply. */
export function caughtId(response: string): string {
  const match = /queued as (msg_\w{26})/.exec(response);
  if (!match) throw new Error(`no message id in ${JSON.stringify(response)}`);
  return match[1]!;
}

/** A raw SMTP conversation for what nodemailer won't do (undeclared sizes, bare commands). */
export async function smtpDialog(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  let buffer = '';
  let waiting: (() => void) | undefined;
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => { buffer += d; waiting?.(); });
  const reply = async (): Promise<{ code: number; text: string }> => {
    for (;;) {
      const end = buffer.search(/^\d{3} .*\r\n/m);
      if (end >= 0) {
        const stop = buffer.indexOf('\r\n', end) + 2;
        const text = buffer.slice(0, stop);
        buffer = buffer.slice(stop);
        return { code: Number(text.slice(end, end + 3)), text };
      }
      await new Promise<void>((resolve) => { waiting = resolve; });
    }
  };
  await reply();
  return {
    async send(line: string) {
      socket.write(`${line}\r\n`);
      return reply();
    },
    write(data: string | Buffer) {
      socket.write(data);
    },
    reply,
    close() {
      socket.end();
    },
  };
}
