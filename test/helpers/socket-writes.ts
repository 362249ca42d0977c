import net from 'node:net';

type SocketWrites = {
  _write: (chunk: unknown, ...rest: unknown[]) => unknown;
  _writev: (chunks: { chunk: unknown }[], ...rest: unknown[]) => unknown;
};

/**
 * Every write made on this process's sockets bound to `localPort` (a TLS socket's too, in clear),
 * as the stream hands it to the socket: one entry a write, holding its chunks. `restore` puts
 * the sockets back as they were.
 */
export function recordSocketWrites(localPort: number) {
  const proto = net.Socket.prototype as unknown as SocketWrites;
  const { _write, _writev } = proto;
  const writes: string[][] = [];
  proto._write = function (this: net.Socket, chunk: unknown, ...rest: unknown[]) {
    if (this.localPort === localPort) writes.push([String(chunk)]);
    return _write.call(this, chunk, ...rest);
  };
  proto._writev = function (this: net.Socket, chunks: { chunk: unknown }[], ...rest: unknown[]) {
    if (this.localPort === localPort) writes.push(chunks.map((c) => String(c.chunk)));
    return _writev.call(this, chunks, ...rest);
  };
  return {
    writes,
    restore() {
      proto._write = _write;
      proto._writev = _writev;
    },
  };
}
