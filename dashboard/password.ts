import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

// Stored as scrypt$N$r$p$salt$hash so the cost can be raised later without breaking old hashes:
// each hash is checked with its own parameters, and one below these is rehashed at sign-in.
const PARAMS = { N: 2 ** 17, r: 8, p: 1 };
const KEY_LENGTH = 64;

/** More password checks are waiting than the process will queue; the route answers 429. */
export class PasswordWorkBusy extends Error {
  constructor() {
    super('Too many password checks are waiting; try again in a moment.');
  }
}

/** Runs at most `concurrency` tasks at once, in arrival order; past `maxWaiting` waiting, refuses. */
export class WorkQueue {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly concurrency: number, private readonly maxWaiting: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= this.concurrency) {
      if (this.waiting.length >= this.maxWaiting) throw new PasswordWorkBusy();
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running++;
    }
    try {
      return await work();
    } finally {
      // The slot passes straight to the next waiter, so a newcomer never jumps the queue.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

/**
 * Each hash holds 128 MiB (128 · r · N bytes) and a thread of libuv's pool of four. One runs at a
 * time per process, so a flood of sign-ins or joins waits its turn instead of taking the memory
 * (and the pool that file and DNS work share); past 32 waiting the next is refused.
 */
const hashing = new WorkQueue(1, 32);

function derive(password: string, salt: Buffer, opts: ScryptOptions): Promise<Buffer> {
  return hashing.run(() => new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_LENGTH, { ...opts, maxmem: 256 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))),
  ));
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS);
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

// Compared against when the email is unknown, so a miss costs as long as a wrong password.
let dummy: Promise<string> | undefined;
export function dummyHash(): Promise<string> {
  dummy ??= hashPassword(randomBytes(16).toString('hex')).catch((err: unknown) => {
    dummy = undefined; // refused while busy: made on a later call
    throw err;
  });
  return dummy;
}

/** Whether a stored hash was made with weaker parameters than today's. */
export function needsRehash(stored: string): boolean {
  const [scheme, n, r, p] = stored.split('$');
  return scheme !== 'scrypt' || Number(n) < PARAMS.N || Number(r) < PARAMS.r || Number(p) < PARAMS.p;
}
