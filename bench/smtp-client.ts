import net from 'node:net';
import tls from 'node:tls';

/**
 * A lean SMTP submission client for the relay benchmark: STARTTLS, AUTH PLAIN, then messages with
 * their commands pipelined (RFC 2920): MAIL, RCPT and DATA in one write, the content after the
 * 354, and the next message's MAIL, RCPT and DATA right behind it, so a message costs one round
 * trip. nodemailer sends each command after the last one's reply, four round trips a message.
 */
export class PipeliningSmtpClient {
  private socket: net.Socket | tls.TLSSocket;
  private buffered = '';
  private lines: string[] = [];
  private waiting: Array<{ resolve: (reply: string) => void; reject: (err: Error) => void }> = [];
  private replies: string[] = [];
  private failure: Error | undefined;
  /** Whether the next message's MAIL, RCPT and DATA already went out behind the last one. */
  private envelopeSent = false;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    this.listen(socket);
  }

  static async connect(opts: { host: string; port: number; starttls: boolean; auth?: { user: string; pass: string } }): Promise<PipeliningSmtpClient> {
    const socket = net.connect(opts.port, opts.host);
    socket.setNoDelay(true);
    const client = new PipeliningSmtpClient(socket);
    await client.expect(220);
    await client.command('EHLO bench.example', 250);
    if (opts.starttls) {
      await client.command('STARTTLS', 220);
      socket.removeAllListeners('data');
      const secure = tls.connect({ socket, rejectUnauthorized: false, servername: 'localhost' });
      await new Promise<void>((resolve, reject) => secure.once('secureConnect', resolve).once('error', reject));
      client.socket = secure;
      client.listen(secure);
      await client.command('EHLO bench.example', 250);
    }
    if (opts.auth) await client.command(`AUTH PLAIN ${Buffer.from(`\0${opts.auth.user}\0${opts.auth.pass}`).toString('base64')}`, 235);
    return client;
  }

  private listen(socket: net.Socket | tls.TLSSocket) {
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => this.read(chunk));
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(new Error('connection closed')));
  }

  private fail(err: Error) {
    this.failure ??= err;
    for (const w of this.waiting.splice(0)) w.reject(err);
  }

  private read(chunk: string) {
    this.buffered += chunk;
    let end: number;
    while ((end = this.buffered.indexOf('\r\n')) >= 0) {
      const line = this.buffered.slice(0, end);
      this.buffered = this.buffered.slice(end + 2);
      this.lines.push(line);
      // "250-..." continues a reply; "250 ..." ends it.
      if (line[3] !== '-') {
        const reply = this.lines.join('\n');
        this.lines = [];
        const waiter = this.waiting.shift();
        if (waiter) waiter.resolve(reply);
        else this.replies.push(reply);
      }
    }
  }

  private next(): Promise<string> {
    const ready = this.replies.shift();
    if (ready !== undefined) return Promise.resolve(ready);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  private async expect(code: number): Promise<string> {
    const reply = await this.next();
    if (!reply.startsWith(String(code))) throw new Error(`expected ${code}, got: ${reply}`);
    return reply;
  }

  private command(line: string, code: number) {
    this.socket.write(`${line}\r\n`);
    return this.expect(code);
  }

  /**
   * One message; resolves with the reply to its content (the 250 with the email's id). With
   * `more`, the next message's MAIL, RCPT and DATA follow its content in the same write, as RFC
   * 2920 allows, so each message after the first costs one round trip.
   */
  async send(from: string, to: string, message: Buffer, more: boolean): Promise<string> {
    const envelope = `MAIL FROM:<${from}>\r\nRCPT TO:<${to}>\r\nDATA\r\n`;
    if (!this.envelopeSent) this.socket.write(envelope);
    await this.expect(250);
    await this.expect(250);
    await this.expect(354);
    this.socket.write(Buffer.concat([dotStuffed(message), Buffer.from(`\r\n.\r\n${more ? envelope : ''}`)]));
    this.envelopeSent = more;
    return this.next();
  }

  quit() {
    this.socket.end('QUIT\r\n');
  }
}

/** RFC 5321 §4.5.2: a line that starts with a dot gets one more. The message ends in CRLF. */
function dotStuffed(message: Buffer): Buffer {
  const text = message.toString('latin1').replace(/\r\n$/, '');
  return Buffer.from(text.replace(/^\./, '..').replaceAll('\r\n.', '\r\n..'), 'latin1');
}
