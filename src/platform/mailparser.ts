/**
 * mailparser, loaded on first use: the API process keeps it out of its start-up, and a worker
 * that never parses (no sink traffic, no relay, no inbound) never loads it. The promise is kept,
 * as each `import()` goes through the module loader again, a cost paid per message otherwise.
 */
let loading: Promise<typeof import('mailparser')> | undefined;

export const loadMailparser = () => (loading ??= import('mailparser'));
