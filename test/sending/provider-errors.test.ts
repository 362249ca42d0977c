import { test } from 'node:test';
import assert from 'node:assert/strict';
import { classifySendError, ProviderFailure } from '../../src/providers/errors.ts';

/** The shape the AWS SDK gives a service error: name from x-amzn-ErrorType, status in $metadata. */
function aws(name: string, status: number, message = 'x', fault: 'client' | 'server' = status >= 500 ? 'server' : 'client') {
  return Object.assign(new Error(message), { name, $fault: fault, $metadata: { httpStatusCode: status } });
}

const failed = (err: unknown) => {
  const c = classifySendError(err);
  return c.retry ? 'retry' : c.lastError;
};

test('SES refusals map onto the contract\'s last_error values', () => {
  assert.equal(failed(aws('MessageRejected', 400, 'Illegal address')), 'message_rejected');
  assert.equal(failed(aws('MessageRejected', 400, 'Email address is not verified. The following identities failed the check in region US-EAST-1: a@example.com')), 'domain_not_verified');
  assert.equal(failed(aws('MailFromDomainNotVerifiedException', 400)), 'domain_not_verified');
  assert.equal(failed(aws('BadRequestException', 400)), 'message_rejected');
  assert.equal(failed(aws('NotFoundException', 404, 'Configuration set <x> does not exist.')), 'message_rejected');
  for (const name of ['InvalidClientTokenId', 'SignatureDoesNotMatch', 'UnrecognizedClientException', 'AccessDeniedException', 'ExpiredTokenException']) {
    assert.equal(failed(aws(name, name === 'UnrecognizedClientException' ? 400 : 403)), 'provider_auth_failed', name);
  }
  assert.equal(failed(aws('SomethingNew', 403)), 'provider_auth_failed');
  assert.equal(failed(aws('AccountSuspendedException', 400)), 'sending_paused');
  assert.equal(failed(aws('SendingPausedException', 400)), 'sending_paused');
});

test('throttling, 5xx and network trouble are retried', () => {
  assert.equal(failed(aws('TooManyRequestsException', 429)), 'retry');
  assert.equal(failed(aws('LimitExceededException', 400)), 'retry');
  assert.equal(failed(aws('Throttling', 400)), 'retry');
  assert.equal(failed(aws('InternalFailure', 500)), 'retry');
  assert.equal(failed(aws('Unknown', 502)), 'retry');
  assert.equal(failed(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' })), 'retry');
  assert.equal(failed(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })), 'retry');
  assert.equal(failed(Object.assign(new Error('aborted'), { name: 'TimeoutError' })), 'retry');
  assert.equal(failed(new TypeError('fetch failed', { cause: { code: 'UND_ERR_SOCKET' } })), 'retry');
});

test('SMTP replies from the sink: 5xx refuses, 4xx defers, EAUTH is a credentials problem', () => {
  assert.equal(failed(Object.assign(new Error('552 too big'), { code: 'EMESSAGE', responseCode: 552 })), 'message_rejected');
  assert.equal(failed(Object.assign(new Error('451 later'), { code: 'EMESSAGE', responseCode: 451 })), 'retry');
  assert.equal(failed(Object.assign(new Error('535 no'), { code: 'EAUTH', responseCode: 535 })), 'provider_auth_failed');
});

test('pre-classified failures pass through, and messages stay short and free of credentials', () => {
  assert.equal(failed(new ProviderFailure('provider_auth_failed', 'cannot decrypt')), 'provider_auth_failed');
  const c = classifySendError(aws('SignatureDoesNotMatch', 403, 'The request signature we calculated does not match. Canonical string: AKIDSECRET…'));
  assert.equal(c.retry, false);
  assert.doesNotMatch(c.message, /AKIDSECRET|Canonical/);
  const long = classifySendError(aws('MessageRejected', 400, 'x'.repeat(5000)));
  assert.ok(long.message.length < 300);
});
