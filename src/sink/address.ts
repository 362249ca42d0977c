import type { Config } from '../platform/config.ts';

export type SinkAddress = { host: string; port: number };

/** Where this process's sink actually listens; with SINK_SMTP_PORT=0 only the listener knows. */
let bound: SinkAddress | undefined;

export function recordSinkAddress(address: SinkAddress | undefined) {
  bound = address;
}

const UNSPECIFIED = new Set(['0.0.0.0', '::', '']);

/**
 * The address a client in this process connects to: the bound one when the sink runs here,
 * otherwise the configured one. A wildcard listener is reached over loopback.
 */
export function sinkAddress(config: Config): SinkAddress {
  const { host, port } = bound ?? { host: config.sinkSmtpHost, port: config.sinkSmtpPort };
  if (!UNSPECIFIED.has(host)) return { host, port };
  return { host: host === '::' ? '::1' : '127.0.0.1', port };
}
