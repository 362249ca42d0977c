import type { CreateEmailIdentityCommandOutput, GetEmailIdentityCommandOutput } from '@aws-sdk/client-sesv2';
import type { DomainStatus } from './schemas.ts';

const SES_STATUS: Record<string, DomainStatus> = {
  PENDING: 'pending',
  SUCCESS: 'success',
  FAILED: 'failed',
  TEMPORARY_FAILURE: 'temporary_failure',
  NOT_STARTED: 'not_started',
};

/**
 * SES's VerificationStatus / DkimAttributes.Status / MailFromDomainStatus onto the spec's
 * vocabulary. A value SES adds later reads as `pending`: never as verified by accident.
 */
export function mapSesStatus(value: string | undefined): DomainStatus | null {
  if (!value) return null;
  return SES_STATUS[value] ?? 'pending';
}

export type IdentityState = {
  verificationStatus: DomainStatus;
  dkimStatus: DomainStatus | null;
  mailFromStatus: DomainStatus | null;
  dkimTokens: string[];
  mailFromDomain: string | null;
};

type Identity = Partial<Pick<GetEmailIdentityCommandOutput, 'VerificationStatus' | 'VerifiedForSendingStatus' | 'DkimAttributes' | 'MailFromAttributes'>>
  | Pick<CreateEmailIdentityCommandOutput, 'VerifiedForSendingStatus' | 'DkimAttributes'>;

/** What the service stores from a CreateEmailIdentity or GetEmailIdentity answer. */
export function identityState(identity: Identity): IdentityState {
  const declared = 'VerificationStatus' in identity ? mapSesStatus(identity.VerificationStatus) : null;
  // Older answers (and CreateEmailIdentity) carry only the boolean.
  const verificationStatus = declared ?? (identity.VerifiedForSendingStatus ? 'success' : 'pending');
  const mailFrom = 'MailFromAttributes' in identity ? identity.MailFromAttributes : undefined;
  return {
    verificationStatus,
    dkimStatus: mapSesStatus(identity.DkimAttributes?.Status),
    mailFromStatus: mailFrom?.MailFromDomain ? (mapSesStatus(mailFrom.MailFromDomainStatus) ?? 'pending') : null,
    dkimTokens: identity.DkimAttributes?.Tokens ?? [],
    mailFromDomain: mailFrom?.MailFromDomain || null,
  };
}
