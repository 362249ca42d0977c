import { test } from 'node:test';
import assert from 'node:assert/strict';
import { normaliseDomainName, normaliseMailFrom, normaliseRegion } from '../../src/domains/names.ts';
import { identityState, mapSesStatus } from '../../src/domains/status.ts';
import { ServiceError } from '../../src/platform/errors.ts';

test('names are trimmed, lower-cased and IDNA-normalised to ASCII', () => {
  assert.equal(normaliseDomainName('  Example.COM '), 'example.com');
  assert.equal(normaliseDomainName('example.com.'), 'example.com');
  assert.equal(normaliseDomainName('Bücher.example'), 'xn--bcher-kva.example');
  assert.equal(normaliseDomainName('xn--bcher-kva.example'), 'xn--bcher-kva.example');
  assert.equal(normaliseDomainName('mail.☃.net'), 'mail.xn--n3h.net');
  assert.equal(normaliseDomainName('EXAMPLE。COM'), 'example.com'); // ideographic full stop
  assert.equal(normaliseDomainName(`${'a'.repeat(63)}.com`), `${'a'.repeat(63)}.com`);
});

const BAD: Array<[string, string, RegExp]> = [
  ['empty', '   ', /required/],
  ['scheme', 'https://example.com', /scheme/],
  ['path', 'example.com/about', /path/],
  ['query', 'example.com?x=1', /path/],
  ['port', 'example.com:25', /port/],
  ['email address', 'me@example.com', /email address/],
  ['wildcard', '*.example.com', /wildcard/],
  ['spaces', 'exa mple.com', /spaces/],
  ['single label', 'localhost', /single label/],
  ['IPv4', '192.0.2.1', /IP address/],
  ['IPv4 shorthand', '1.2.3', /IP address/],
  ['IPv6', '[2001:db8::1]', /IP address/],
  ['bare IPv6', '2001:db8::1', /IP address/],
  ['long label', `${'a'.repeat(64)}.com`, /longer than 63/],
  ['long name', `${Array(64).fill('abc').join('.')}.com`, /longer than 253/],
  ['empty label', 'a..com', /not a valid domain/],
  ['leading hyphen', '-a.com', /not a valid domain/],
  ['underscore', 'a_b.com', /not a valid domain/],
];

for (const [what, input, message] of BAD) {
  test(`refuses a domain with ${what}: ${JSON.stringify(input).slice(0, 40)}`, () => {
    assert.throws(() => normaliseDomainName(input), (err: unknown) => err instanceof ServiceError && message.test(err.message));
  });
}

test('MAIL FROM is a subdomain of the domain, given as a label or in full', () => {
  assert.equal(normaliseMailFrom('mail', 'example.com'), 'mail.example.com');
  assert.equal(normaliseMailFrom('Bounce.Example.com', 'example.com'), 'bounce.example.com');
  assert.equal(normaliseMailFrom('a.b', 'example.com'), 'a.b.example.com');
  assert.throws(() => normaliseMailFrom('example.com', 'example.com'), /subdomain of example.com/);
  assert.throws(() => normaliseMailFrom('ma il', 'example.com'), /spaces/);
  assert.throws(() => normaliseMailFrom('https://x', 'example.com'), /scheme/);
});

test('regions must look like AWS regions', () => {
  assert.equal(normaliseRegion('EU-West-1'), 'eu-west-1');
  assert.throws(() => normaliseRegion('europe'), /not an AWS region/);
});

test('SES statuses map onto the spec vocabulary', () => {
  assert.equal(mapSesStatus('PENDING'), 'pending');
  assert.equal(mapSesStatus('SUCCESS'), 'success');
  assert.equal(mapSesStatus('FAILED'), 'failed');
  assert.equal(mapSesStatus('TEMPORARY_FAILURE'), 'temporary_failure');
  assert.equal(mapSesStatus('NOT_STARTED'), 'not_started');
  assert.equal(mapSesStatus(undefined), null);
  assert.equal(mapSesStatus('SOMETHING_NEW'), 'pending', 'unknown values never read as verified');
});

test('verification_status falls back to VerifiedForSendingStatus when VerificationStatus is absent', () => {
  assert.equal(identityState({ VerifiedForSendingStatus: true }).verificationStatus, 'success');
  assert.equal(identityState({ VerifiedForSendingStatus: false }).verificationStatus, 'pending');
  assert.equal(identityState({ VerifiedForSendingStatus: true, VerificationStatus: 'FAILED' }).verificationStatus, 'failed');
  const s = identityState({
    VerificationStatus: 'SUCCESS',
    DkimAttributes: { Status: 'TEMPORARY_FAILURE', Tokens: ['t1'] },
    MailFromAttributes: { MailFromDomain: 'm.example.com', MailFromDomainStatus: 'FAILED', BehaviorOnMxFailure: 'USE_DEFAULT_VALUE' },
  });
  assert.deepEqual(s, { verificationStatus: 'success', dkimStatus: 'temporary_failure', mailFromStatus: 'failed', dkimTokens: ['t1'], mailFromDomain: 'm.example.com' });
});
