export type DnsRecord = { record_type: 'CNAME' | 'MX' | 'TXT'; name: string; value: string };

/**
 * The records a customer publishes, derived from what SES returned: one Easy DKIM CNAME per
 * token, plus MX and SPF for a custom MAIL FROM domain. Names are fully qualified.
 */
export function dnsRecordsFor(domain: {
  value: string;
  region: string;
  dkimTokens: string[];
  mailFromDomain: string | null;
}): DnsRecord[] {
  const records: DnsRecord[] = domain.dkimTokens.map((token) => ({
    record_type: 'CNAME',
    name: `${token}._domainkey.${domain.value}`,
    value: `${token}.dkim.amazonses.com`,
  }));
  if (domain.mailFromDomain) {
    records.push(
      { record_type: 'MX', name: domain.mailFromDomain, value: `10 feedback-smtp.${domain.region}.amazonses.com` },
      { record_type: 'TXT', name: domain.mailFromDomain, value: '"v=spf1 include:amazonses.com ~all"' },
    );
  }
  return records;
}
