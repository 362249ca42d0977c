import { Readable } from 'node:stream';
import { parseSinkMessage, readReceived, readBodies, stripReply, decodeWords, extractAttachment, setMimeBudget, closeMimePool, MimeBudgetExceeded } from '../src/platform/mime-pool.ts';
const msg = 'From: A <a@x.com>\r\nTo: b@y.com\r\nSubject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe?=\r\nContent-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\nhello\r\n\r\nOn Mon, x wrote:\r\n> old\r\n--zz\r\nContent-Type: application/octet-stream; name=a.bin\r\nContent-Transfer-Encoding: base64\r\n\r\nAAECAw==\r\n--zz--\r\n';
let t = Date.now();
console.log(await parseSinkMessage(Buffer.from(msg), { from: 'a@x.com', recipients: [] }), Date.now() - t);
t = Date.now();
console.log(await readReceived(Readable.from([Buffer.from(msg)])), Date.now() - t);
console.log(await readBodies(Buffer.from(msg)));
console.log(await stripReply('hello\n\nOn Mon, x wrote:\n> old\n'));
console.log(await decodeWords('=?UTF-8?Q?Gr=C3=BC=C3=9Fe?='));
const a = await extractAttachment(Readable.from([Buffer.from(msg)]), 0);
const parts: Buffer[] = []; for await (const c of a!) parts.push(c); console.log('att', Buffer.concat(parts));
console.log('att1', await extractAttachment(Readable.from([Buffer.from(msg)]), 1));
await setMimeBudget({ timeMs: 500 });
const opa = 'hi\n' + 'Op a\n'.repeat(200000);
t = Date.now();
try { await stripReply(opa); } catch (e) { console.log((e as Error).message, e instanceof MimeBudgetExceeded, Date.now() - t); }
console.log(await decodeWords('=?UTF-8?Q?ok?='));
await setMimeBudget({ heapMb: 16 });
try { await stripReply('x'.repeat(100_000_000)); } catch (e) { console.log((e as Error).message, e instanceof MimeBudgetExceeded, (e as any).code); }
await closeMimePool();
