// The MIME pool's thread entry (src/platform/mime-pool.ts runs it): see src/platform/mime-worker.ts.
export { default } from './platform/mime-worker.ts';
