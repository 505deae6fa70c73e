import { HostError } from '../../host/errors.js';

/** A CSI driver's error answer: a gRPC status by name and a message that says what to do. */
export class DriverError extends Error {
  override name = 'DriverError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const invalid = (message: string) => new DriverError('INVALID_ARGUMENT', message);
export const notFound = (message: string) => new DriverError('NOT_FOUND', message);
export const alreadyExists = (message: string) => new DriverError('ALREADY_EXISTS', message);
export const failedPrecondition = (message: string) =>
  new DriverError('FAILED_PRECONDITION', message);

/** A required request field: INVALID_ARGUMENT naming it when empty. */
export function required(value: string | undefined, field: string, rpc: string): string {
  if (value === undefined || value === '') throw invalid(`${rpc}: ${field} is required`);
  return value;
}

/** A host failure as the driver answers it: INTERNAL with the host's message. */
export function driverErrorOf(error: unknown): DriverError {
  if (error instanceof DriverError) return error;
  if (error instanceof HostError) return new DriverError('INTERNAL', error.message);
  return new DriverError('INTERNAL', error instanceof Error ? error.message : String(error));
}
