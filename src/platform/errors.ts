/**
 * An error a service function raises for its caller to show: the CLI prints its message, the
 * dashboard renders it beside the form. Callers branch on `code`, never on the message text.
 */
export type ServiceErrorCode =
  | 'invalid_input'
  | 'not_found'
  | 'conflict'
  | 'not_configured'
  | 'provider_error'
  | 'destination_refused';

export class ServiceError extends Error {
  constructor(readonly code: ServiceErrorCode, message: string) {
    super(message);
    this.name = 'ServiceError';
  }
}
