/**
 * A delivery's `error` is one of these words, never a raw exception: exceptions carry the
 * address and URL, which the delivery log must not repeat back.
 */
export type DeliveryError =
  | 'timeout'
  | 'connection_refused'
  | 'connection_reset'
  | 'host_unreachable'
  | 'dns_failure'
  | 'tls_error'
  | 'connection_failed'
  | 'destination_blocked'
  | 'redirect_not_followed'
  | 'http_error'
  | 'endpoint_disabled';

const BY_CODE: Record<string, DeliveryError> = {
  EDESTINATIONBLOCKED: 'destination_blocked',
  ETIMEDOUT: 'timeout',
  UND_ERR_CONNECT_TIMEOUT: 'timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  UND_ERR_BODY_TIMEOUT: 'timeout',
  ECONNREFUSED: 'connection_refused',
  ECONNRESET: 'connection_reset',
  EPIPE: 'connection_reset',
  UND_ERR_SOCKET: 'connection_reset',
  UND_ERR_CLOSED: 'connection_reset',
  EHOSTUNREACH: 'host_unreachable',
  ENETUNREACH: 'host_unreachable',
  EHOSTDOWN: 'host_unreachable',
  ENOTFOUND: 'dns_failure',
  EAI_AGAIN: 'dns_failure',
  EAI_FAIL: 'dns_failure',
  ENODATA: 'dns_failure',
  EPROTO: 'tls_error',
};

const TLS_CODE = /^(ERR_TLS_|ERR_SSL_)|CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|DEPTH_ZERO/;

/** Walks the error, its cause and an AggregateError's members (happy-eyeballs) for a known code. */
function classify(err: unknown, depth = 0): DeliveryError | undefined {
  if (!err || typeof err !== 'object' || depth > 4) return undefined;
  const e = err as { code?: unknown; name?: unknown; cause?: unknown; errors?: unknown[] };
  if (e.name === 'TimeoutError') return 'timeout';
  const code = typeof e.code === 'string' ? e.code : '';
  if (BY_CODE[code]) return BY_CODE[code];
  if (TLS_CODE.test(code)) return 'tls_error';
  for (const inner of [e.cause, ...(Array.isArray(e.errors) ? e.errors : [])]) {
    const found = classify(inner, depth + 1);
    if (found) return found;
  }
  return undefined;
}

export function normaliseTransportError(err: unknown, signal?: AbortSignal): DeliveryError {
  if (signal?.aborted) return 'timeout';
  return classify(err) ?? 'connection_failed';
}
