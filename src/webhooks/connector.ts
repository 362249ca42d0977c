import net, { type LookupFunction } from 'node:net';
import { buildConnector } from 'undici';
import { bareHost, blockedReason, type DestinationPolicy, type Resolver } from './destination.ts';

/** Raised inside the connection when the destination fails §6.4; recorded as `destination_blocked`. */
export class DestinationBlockedError extends Error {
  readonly code = 'EDESTINATIONBLOCKED';
}

/**
 * The DNS lookup the socket itself uses. Checking here, rather than before the request, means the
 * address that is vetted is the address that is dialled: a DNS answer that changes between a
 * check and the connect (rebinding) cannot slip through.
 */
export function guardedLookup(policy: DestinationPolicy, resolve: Resolver): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (answers) => {
        const wanted = options.family === 4 || options.family === 6 ? answers.filter((a) => a.family === options.family) : answers;
        if (wanted.length === 0) return callback(Object.assign(new Error('no address'), { code: 'ENOTFOUND' }), '', 0);
        // One bad answer refuses the lot, so a mixed answer cannot be used to reach inside.
        if (wanted.some((a) => blockedReason(a.address, policy))) return callback(new DestinationBlockedError('destination blocked'), '', 0);
        if (options.all) return (callback as unknown as (e: null, all: typeof wanted) => void)(null, wanted);
        callback(null, wanted[0]!.address, wanted[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(Object.assign(new Error('dns failure'), { code: err.code ?? 'ENOTFOUND' }), '', 0),
    );
  };
}

export type ConnectorOptions = {
  policy: DestinationPolicy;
  resolve: Resolver;
  timeoutMs: number;
  /** Extra trust anchors; tests use it for a self-signed receiver. Production uses the system roots. */
  ca?: string | Buffer;
};

/**
 * An undici connector that vets every connection: literal IP hosts here (the socket never looks
 * them up), names inside the socket's own DNS lookup.
 */
export function guardedConnector(opts: ConnectorOptions): buildConnector.connector {
  const connect = buildConnector({
    timeout: opts.timeoutMs,
    allowH2: false,
    lookup: guardedLookup(opts.policy, opts.resolve),
    ...(opts.ca ? { ca: opts.ca } : {}),
  } as buildConnector.BuildOptions);
  return (options, callback) => {
    const host = bareHost(options.hostname);
    if (net.isIP(host) && blockedReason(host, opts.policy)) {
      process.nextTick(callback, new DestinationBlockedError('destination blocked'), null);
      return;
    }
    connect(options, callback);
  };
}
