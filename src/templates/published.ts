import type { Sql } from '../platform/db.ts';
import { GroupCommit } from '../platform/group-commit.ts';
import * as q from './queries.ts';

/**
 * Which version of a template sends use, as this process knows it. A send asks this for every
 * request, so answers are remembered; a publish, an edit (an alias may move) or a delete anywhere
 * clears them, through a NOTIFY every API process listens for. Until its LISTEN is in place, and
 * whenever it reconnects, a process remembers nothing and asks the database.
 */

export const TEMPLATES_CHANNEL = 'mailroom_templates';

type Found = { id: string; publishedVersionId: string | null };
type Known = { found: Found; at: number };

/** A safety net under the notifications: nothing is trusted for longer than this. */
const MAX_AGE_MS = 60_000;
const MAX_ENTRIES = 10_000;

class PublishedVersions {
  readonly #known = new Map<string, Known>();
  /** Bumped at every clear, so an answer read before a clear is never remembered after it. */
  #generation = 0;
  #listening = false;
  /** The process-wide change count this pool last cleared for. */
  #seenChanges = localChanges;
  readonly #lookups: GroupCommit<q.PublishedLookup, Found | undefined>;

  constructor(private readonly sql: Sql) {
    // Lookups of sends that arrive together share one query, as key lookups do.
    this.#lookups = new GroupCommit((lookups) => q.findPublished(sql, lookups), { maxInFlight: 4 });
    sql.listen(TEMPLATES_CHANNEL, () => this.clear(), () => { this.clear(); this.#listening = true; })
      .catch(() => { this.#listening = false; });
  }

  clear() {
    this.#known.clear();
    this.#generation++;
  }

  async find(projectId: string, idOrAlias: string): Promise<Found | undefined> {
    if (this.#seenChanges !== localChanges) {
      this.#seenChanges = localChanges;
      this.clear();
    }
    const key = `${projectId}\u0000${idOrAlias}`;
    const now = Date.now();
    const known = this.#known.get(key);
    if (known && this.#listening && now - known.at < MAX_AGE_MS) return known.found;
    const generation = this.#generation;
    const found = await this.#lookups.run({ projectId, idOrAlias });
    // Only what exists is remembered, so a template created a moment later is found at once.
    if (found && this.#listening && generation === this.#generation) {
      if (this.#known.size >= MAX_ENTRIES) this.#known.clear();
      this.#known.set(key, { found, at: now });
    }
    return found;
  }
}

/** Changes this process made itself: they clear every pool's answers before its next lookup. */
let localChanges = 0;
const byPool = new WeakMap<Sql, PublishedVersions>();

/** The published version id of the template an id or alias names, or undefined when there is none. */
export function findPublishedVersion(sql: Sql, projectId: string, idOrAlias: string) {
  let versions = byPool.get(sql);
  if (!versions) byPool.set(sql, versions = new PublishedVersions(sql));
  return versions.find(projectId, idOrAlias);
}

/**
 * After a publish, an edit or a delete: this process forgets at once (its own next send must see
 * the change), and every other process forgets when the notification reaches it.
 */
export async function announceTemplateChange(sql: Sql) {
  localChanges++;
  await sql`select pg_notify(${TEMPLATES_CHANNEL}, '')`;
}
