import { loadOnce } from './load-once.ts';

/** mailparser: the API process keeps it out of its start-up, and a worker that never parses never loads it. */
export const loadMailparser = loadOnce(() => import('mailparser'));
