import type { Sql } from '../../src/platform/db.ts';
import { newId } from '../../src/platform/ids.ts';

export type EmailFields = {
  from?: string;
  to?: string[];
  cc?: string[];
  bcc?: string[];
  replyTo?: string[];
  subject?: string;
  html?: string | null;
  text?: string | null;
  headers?: Record<string, string>;
  attachments?: { filename: string; content_type: string; content: string }[];
  attemptCount?: number;
};

/**
 * An email row as `POST /v1/emails` records it. With `enqueue` the `email__send` job is added in
 * the same transaction, as the route does; without, the test runs the task itself.
 */
export async function insertEmail(sql: Sql, projectId: string, fields: EmailFields = {}, enqueue = true): Promise<string> {
  const id = newId('email');
  await sql.begin(async (tx) => {
    await tx`
      insert into emails (id, project_id, from_address, to_addresses, cc_addresses, bcc_addresses,
        reply_to_addresses, subject, html, text, headers, attachments, attempt_count)
      values (${id}, ${projectId}, ${fields.from ?? 'Sender <sender@example.com>'},
        ${fields.to ?? ['to@example.net']}::text[], ${fields.cc ?? []}::text[], ${fields.bcc ?? []}::text[],
        ${fields.replyTo ?? []}::text[], ${fields.subject ?? 'Hello'},
        ${fields.html === undefined ? '<p>Hello</p>' : fields.html}, ${fields.text === undefined ? 'Hello' : fields.text},
        ${tx.json(fields.headers ?? {})}, ${tx.json(fields.attachments ?? [])}, ${fields.attemptCount ?? 0})`;
    if (enqueue) {
      await tx`
        select graphile_worker.add_job('email__send', json_build_object('email_id', ${id}::text, 'project_id', ${projectId}::text),
          max_attempts := 25, job_key := ${id}::text)`;
    }
  });
  return id;
}

export type EmailState = {
  status: string;
  attemptCount: number;
  lastError: string | null;
  providerMessageId: string | null;
  sentAt: Date | null;
  deliveredAt: Date | null;
};

export async function emailState(sql: Sql, projectId: string, id: string): Promise<EmailState> {
  const [row] = await sql<[EmailState]>`
    select status, attempt_count, last_error, provider_message_id, sent_at, delivered_at
    from emails where id = ${id} and project_id = ${projectId}`;
  return row;
}

/** Waits until the email is `sent` or `failed`. */
export async function settled(sql: Sql, projectId: string, id: string, timeoutMs = 15_000): Promise<EmailState> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await emailState(sql, projectId, id);
    if (state.status === 'sent' || state.status === 'failed') return state;
    if (Date.now() > deadline) throw new Error(`email ${id} still ${state.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function eventsOf(sql: Sql, projectId: string, emailId: string) {
  return sql<{ type: string; data: Record<string, unknown> }[]>`
    select type, data from events where project_id = ${projectId} and email_id = ${emailId} order by id`;
}

/** Runs a task function outside graphile-worker, as a retried job would. */
export const noHelpers = {} as never;
