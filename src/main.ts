import { boot, configOrExit } from './platform/runtime.ts';

await boot('all', configOrExit());
