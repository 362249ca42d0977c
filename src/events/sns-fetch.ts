/**
 * The two outbound calls HTTPS push makes to SNS. Injectable (AppDeps.snsFetch) so tests can
 * use a locally generated certificate and record confirmations.
 */
export type SnsFetch = {
  /** The PEM at a SigningCertURL that already passed `isSnsUrl`. */
  cert(url: string): Promise<string>;
  /** Visits a SubscribeURL that already passed `isSnsUrl`; throws unless SNS answered 2xx. */
  confirm(url: string): Promise<void>;
};

const TIMEOUT_MS = 5_000;
const MAX_CERT_BYTES = 64 * 1024;
const MAX_CACHED = 32;

async function get(url: string, maxBytes: number): Promise<string> {
  // undici's request never follows redirects, so the validated host is the one answering. Loaded
  // on first use: most API processes never receive an SNS push, and undici is 5 MB of heap.
  const { request } = await import('undici');
  const res = await request(url, { method: 'GET', headersTimeout: TIMEOUT_MS, bodyTimeout: TIMEOUT_MS, signal: AbortSignal.timeout(TIMEOUT_MS) });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) {
      res.body.destroy();
      throw new Error(`SNS answered more than ${maxBytes} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  if (res.statusCode < 200 || res.statusCode > 299) throw new Error(`SNS answered ${res.statusCode}`);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The real fetcher. Certificates are cached per URL (SNS rotates them by publishing a new URL),
 * and concurrent requests for one URL share a single fetch.
 */
export function createSnsFetch(): SnsFetch {
  const certs = new Map<string, Promise<string>>();
  return {
    cert(url) {
      let pending = certs.get(url);
      if (!pending) {
        if (certs.size >= MAX_CACHED) certs.delete(certs.keys().next().value!);
        pending = get(url, MAX_CERT_BYTES);
        certs.set(url, pending);
        pending.catch(() => certs.delete(url));
      }
      return pending;
    },
    async confirm(url) {
      await get(url, MAX_CERT_BYTES);
    },
  };
}
