import { spawn, type ChildProcess } from 'node:child_process';
import { after } from 'node:test';
import path from 'node:path';
import { readdirSync } from 'node:fs';

export const ROOT = path.resolve(import.meta.dirname, '../..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');
/** How many migrations a fresh database gets. */
export const COMMITTED_MIGRATIONS = readdirSync(path.join(ROOT, 'migrations/committed')).filter((f) => f.endsWith('.sql')).length;
const BIN = path.join(ROOT, 'node_modules/.bin');

export type Spawned = {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
  /** Resolves with the first JSON log line matching `msg`. */
  logLine(msg: string, timeoutMs?: number): Promise<Record<string, unknown>>;
};

/**
 * The entry points the production bundle carries (built once per run by the global setup): a test
 * starts these from dist/, as production does, which also spares each process tsx's start-up.
 */
const BUILT_ENTRIES: Record<string, string> = {
  'src/main.ts': 'dist/main.js', 'src/api.ts': 'dist/api.js', 'src/worker.ts': 'dist/worker.js', 'src/cli.ts': 'dist/cli.js',
};

/**
 * Runs an entry point (src/main.ts, src/cli.ts, …): its built form when it has one, otherwise
 * through tsx. Node 24 from the project first on PATH, only the environment given plus PATH and
 * HOME. Killed after the file.
 */
export function spawnEntry(entry: string, env: Record<string, string>, args: string[] = []): Spawned {
  const built = BUILT_ENTRIES[entry];
  if (built) return spawnBuilt(built, env, [], args);
  return spawnCommand(TSX, [path.join(ROOT, entry), ...args], env);
}

/** Runs a built entry point (dist/api.js, …) as production does: Node 24 itself, nothing in between. */
export function spawnBuilt(entry: string, env: Record<string, string>, nodeArgs: string[] = [], args: string[] = []): Spawned {
  return spawnCommand(path.join(BIN, 'node'), [...nodeArgs, path.join(ROOT, entry), ...args], env);
}

function spawnCommand(command: string, args: string[], env: Record<string, string>): Spawned {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { PATH: `${BIN}:${process.env.PATH}`, HOME: process.env.HOME ?? '/root', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => { out += d; });
  child.stderr!.on('data', (d) => { err += d; });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  after(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    async logLine(msg, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        for (const line of out.split('\n')) {
          try {
            const parsed = JSON.parse(line);
            if (parsed.msg === msg) return parsed;
          } catch { /* not JSON */ }
        }
        if (child.exitCode !== null) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`no "${msg}" log line; stdout:\n${out}\nstderr:\n${err}`);
    },
  };
}

/** Runs the CLI to completion: `npm run --silent cli -- …` without npm's own start-up. */
export async function runCli(args: string[], env: Record<string, string>) {
  const p = spawnEntry('src/cli.ts', env, args);
  const code = await p.exited;
  return { code, stdout: p.stdout(), stderr: p.stderr(), json: () => JSON.parse(p.stdout()) };
}
