import { setPriority } from 'node:os';

/**
 * Schedules the given threads (a process id names its main thread; 0 is this one) ahead of the
 * rest of the suite's processes where the host allows it, and answers how to put them back.
 *
 * A test that times something across processes (a probe, a throttle heard by other workers) stands
 * in for parts that have hosts of their own in production; on a CI machine shared with other test
 * files it would otherwise time its own wait for a CPU. Linux keeps a nice value per thread, so
 * only the named threads move: a held event loop is held whatever its priority.
 */
export function scheduleAhead(pids: number[]): () => void {
  const moved = pids.filter((pid) => {
    try { setPriority(pid, -10); return true; } catch { return false; /* not permitted: runs as it is */ }
  });
  return () => {
    for (const pid of moved) try { setPriority(pid, 0); } catch { /* gone */ }
  };
}
