/**
 * A module loaded on first use (kept out of a process's start-up until it is needed) and the
 * promise kept: each `import()` goes through the module loader again, a cost paid per message
 * when the import sits on a hot path.
 */
export function loadOnce<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () => (loading ??= load());
}
