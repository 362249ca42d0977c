import addressparser from 'nodemailer/lib/addressparser';
import { isMailbox } from '../emails/mailbox.ts';

/**
 * The bare, lower-cased address of a stored recipient such as `"Ann" <Ann@Example.com>`.
 * Suppressions match on this form, so a display name or letter case never lets a suppressed
 * address through.
 */
export function normaliseAddress(recipient: string): string {
  const [first] = addressparser(recipient, { flatten: true });
  return (first?.address || recipient).trim().toLowerCase();
}

/** The bare address as written (case kept), for SMTP envelopes and the SES destination. */
export function bareAddress(recipient: string): string {
  const [first] = addressparser(recipient, { flatten: true });
  return (first?.address || recipient).trim();
}

/** The stored form of an address typed by a person or taken from a URL; undefined when it is not one. */
export function storedAddress(value: string): string | undefined {
  return isMailbox(value) ? normaliseAddress(value) : undefined;
}
