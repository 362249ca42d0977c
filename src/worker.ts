import { boot, configOrExit } from './platform/runtime.ts';

await boot('worker', configOrExit());
