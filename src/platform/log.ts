import { pino, type Logger } from 'pino';

export type { Logger };

/** Structured JSON on stdout. Secrets never reach here: redact the usual suspects anyway. */
export function createLogger(level: string, name = 'mailroom'): Logger {
  return pino({
    name,
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: ['req.headers.authorization', '*.secret', '*.password', '*.key'],
  });
}
