import type { Sql } from '../../src/platform/db.ts';
import { newId } from '../../src/platform/ids.ts';

/** A segment of `n` contacts `c<i>@example.test`, written in one statement (contacts routes are not under test here). */
export async function seedSegment(sql: Sql, projectId: string, n: number, prefix = 'c') {
  const segmentId = newId('segment');
  await sql`insert into segments (id, project_id, name) values (${segmentId}, ${projectId}, 'everyone')`;
  const ids = Array.from({ length: n }, () => newId('contact'));
  await sql`
    insert into contacts (id, project_id, email, first_name, properties)
    select id, ${projectId}, ${prefix} || i || '@example.test', case when i % 2 = 0 then 'Name' || i end,
      case when i % 3 = 0 then jsonb_build_object('plan', 'pro') else '{}'::jsonb end
    from unnest(${ids}::text[]) with ordinality as t(id, i)`;
  await sql`insert into contact_segments (segment_id, contact_id, project_id) select ${segmentId}, id, ${projectId} from unnest(${ids}::text[]) id`;
  return { segmentId, contactIds: ids, email: (i: number) => `${prefix}${i + 1}@example.test` };
}

export async function seedTopic(sql: Sql, projectId: string, defaultSubscription: 'opt_in' | 'opt_out', visibility: 'public' | 'private' = 'public', name = `topic ${defaultSubscription}`) {
  const id = newId('topic');
  await sql`insert into topics (id, project_id, name, default_subscription, visibility) values (${id}, ${projectId}, ${name}, ${defaultSubscription}, ${visibility})`;
  return id;
}

export async function setSubscription(sql: Sql, projectId: string, contactId: string, topicId: string, subscription: 'opt_in' | 'opt_out') {
  await sql`insert into contact_topics (contact_id, topic_id, project_id, subscription) values (${contactId}, ${topicId}, ${projectId}, ${subscription})`;
}

export type Caught = { emailId: string; to: string; subject: string; html: string | null; text: string | null; raw: string };

export async function caughtMail(sql: Sql, projectId: string): Promise<Caught[]> {
  const rows = await sql<{ emailId: string; toAddresses: string[]; subject: string; html: string | null; text: string | null; raw: Buffer }[]>`
    select email_id, to_addresses, subject, html, text, raw from sink_messages where project_id = ${projectId} order by id`;
  return rows.map((r) => ({ emailId: r.emailId, to: r.toAddresses[0]!, subject: r.subject, html: r.html, text: r.text, raw: r.raw.toString('utf8') }));
}
