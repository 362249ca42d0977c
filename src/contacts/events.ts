import type { Sql, TxSql } from '../platform/db.ts';

export type ContactEventType = 'contact.created' | 'contact.updated' | 'contact.deleted' | 'contact.topics.updated';

/**
 * Records a contact's webhook event in the caller's transaction. A placeholder until the contacts
 * capability's own (which builds the event's data and its deliveries) takes its place.
 */
export async function recordContactEvent(_tx: Sql | TxSql, _projectId: string, _contactId: string, _type: ContactEventType): Promise<void> {}
