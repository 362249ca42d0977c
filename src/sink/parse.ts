/**
 * A caught message is parsed in the MIME pool (src/platform/mime-pool.ts), off the event loop and
 * within its budgets. Bodies are kept as sent: no text made up from HTML, no cid: links
 * rewritten, so what the API shows is what a receiver would get.
 */
export { parseSinkMessage, type ParsedSinkMessage } from '../platform/mime-pool.ts';
