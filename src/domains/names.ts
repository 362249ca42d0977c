import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { ServiceError } from '../platform/errors.ts';

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;

/**
 * The domain as SES and DNS know it: trimmed, lower-cased and IDNA-normalised to ASCII
 * (`Bücher.example` becomes `xn--bcher-kva.example`), so one domain has one spelling and the
 * per-project uniqueness holds. Anything that is not a plain registrable host name is refused
 * with a message saying what to type instead.
 */
export function normaliseDomainName(input: string, what = 'domain'): string {
  const raw = input.trim().toLowerCase();
  if (!raw) throw new ServiceError('invalid_input', `${what} is required`);
  if (/^[a-z][a-z0-9+.-]*:\/\//.test(raw)) throw new ServiceError('invalid_input', `${what} "${raw}" has a scheme; give the bare domain, such as example.com`);
  if (/\s/.test(raw)) throw new ServiceError('invalid_input', `${what} "${raw}" contains spaces`);
  if (raw.includes('@')) throw new ServiceError('invalid_input', `${what} "${raw}" looks like an email address; give only the part after @`);
  if (/[/?#\\]/.test(raw)) throw new ServiceError('invalid_input', `${what} "${raw}" has a path; give the bare domain, such as example.com`);
  if (raw.includes('*')) throw new ServiceError('invalid_input', `${what} "${raw}" is a wildcard; give one domain`);
  if (raw.startsWith('[') || isIP(raw)) throw new ServiceError('invalid_input', `${what} "${raw}" is an IP address; give a domain name`);
  if (raw.includes(':')) throw new ServiceError('invalid_input', `${what} "${raw}" has a port; give the bare domain, such as example.com`);
  // One trailing dot is the fully qualified spelling of the same name.
  const ascii = domainToASCII(raw.replace(/\.$/, ''));
  if (!ascii) throw new ServiceError('invalid_input', `${what} "${raw}" is not a valid domain name`);
  const labels = ascii.split('.');
  if (labels.length < 2) throw new ServiceError('invalid_input', `${what} "${raw}" is a single label; give a full domain such as example.com`);
  if (/^\d+$/.test(labels.at(-1)!) || isIP(ascii)) throw new ServiceError('invalid_input', `${what} "${raw}" is an IP address; give a domain name`);
  if (ascii.length > 253) throw new ServiceError('invalid_input', `${what} is longer than 253 characters`);
  for (const label of labels) {
    if (label.length > 63) throw new ServiceError('invalid_input', `${what} "${raw}" has a label longer than 63 characters`);
    if (!LABEL.test(label)) throw new ServiceError('invalid_input', `${what} "${raw}" is not a valid domain name (labels are letters, digits and inner hyphens)`);
  }
  return ascii;
}

/**
 * A custom MAIL FROM domain: a subdomain label (`mail`) or a full name under the domain
 * (`bounce.example.com`). SES requires it to be a subdomain of the identity, never the domain itself.
 */
export function normaliseMailFrom(input: string, domain: string): string {
  const raw = input.trim().toLowerCase().replace(/\.$/, '');
  const full = raw.endsWith(`.${domain}`) || raw === domain ? raw : `${raw}.${domain}`;
  const ascii = normaliseDomainName(full, 'MAIL FROM domain');
  if (ascii === domain || !ascii.endsWith(`.${domain}`)) throw new ServiceError('invalid_input', `MAIL FROM domain must be a subdomain of ${domain}, such as mail.${domain}`);
  return ascii;
}

export function normaliseRegion(input: string): string {
  const region = input.trim().toLowerCase();
  if (!REGION.test(region)) throw new ServiceError('invalid_input', `region "${input}" is not an AWS region such as us-east-1`);
  return region;
}
