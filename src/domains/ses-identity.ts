import {
  CreateEmailIdentityCommand,
  GetEmailIdentityCommand,
  PutEmailIdentityMailFromAttributesCommand,
  type SESv2Client,
} from '@aws-sdk/client-sesv2';
import { ServiceError } from '../platform/errors.ts';
import { identityState, type IdentityState } from './status.ts';

/** SES refused or could not be reached. The re-check logs it and tries again at the next tick. */
export class DomainProviderError extends ServiceError {
  constructor(message: string) { super('provider_error', message); }
}

function providerError(op: string, name: string, err: unknown): DomainProviderError {
  const e = err as { name?: string; message?: string; code?: string };
  const reason = e.code === 'ECONNREFUSED' ? 'connection refused' : e.message || e.name || String(err);
  return new DomainProviderError(`SES ${op} for ${name} failed: ${e.name && e.name !== 'Error' ? `${e.name}: ` : ''}${reason}`);
}

/**
 * Creates the identity with Easy DKIM (no DkimSigningAttributes: SES makes the keys and hands
 * back three CNAME tokens). An identity that already exists in this account and region, made
 * earlier by hand or by an add that failed half-way, is adopted as it stands.
 */
export async function createOrAdoptIdentity(client: SESv2Client, name: string): Promise<{ state: IdentityState; adopted: boolean }> {
  try {
    const created = await client.send(new CreateEmailIdentityCommand({ EmailIdentity: name }));
    return { state: identityState(created), adopted: false };
  } catch (err) {
    if ((err as Error).name !== 'AlreadyExistsException') throw providerError('CreateEmailIdentity', name, err);
  }
  const state = await getIdentity(client, name);
  if (!state) throw new DomainProviderError(`SES reported ${name} as existing but then could not find it; try again`);
  return { state, adopted: true };
}

/** The identity's state now, or undefined when SES no longer has it. */
export async function getIdentity(client: SESv2Client, name: string): Promise<IdentityState | undefined> {
  try {
    return identityState(await client.send(new GetEmailIdentityCommand({ EmailIdentity: name })));
  } catch (err) {
    if ((err as Error).name === 'NotFoundException') return undefined;
    throw providerError('GetEmailIdentity', name, err);
  }
}

export async function putMailFrom(client: SESv2Client, name: string, mailFromDomain: string): Promise<void> {
  try {
    await client.send(new PutEmailIdentityMailFromAttributesCommand({ EmailIdentity: name, MailFromDomain: mailFromDomain }));
  } catch (err) {
    throw providerError('PutEmailIdentityMailFromAttributes', name, err);
  }
}
