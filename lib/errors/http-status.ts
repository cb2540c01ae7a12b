import { HttpStatus } from '@nestjs/common';
import { IdempotencyErrorCode } from './idempotency.errors';

/** The HTTP status each error code is answered with. */
export const IDEMPOTENCY_HTTP_STATUS: Record<IdempotencyErrorCode, HttpStatus> = {
  [IdempotencyErrorCode.KeyMissing]: HttpStatus.BAD_REQUEST,
  [IdempotencyErrorCode.KeyInvalid]: HttpStatus.BAD_REQUEST,
  [IdempotencyErrorCode.InProgress]: HttpStatus.CONFLICT,
  [IdempotencyErrorCode.KeyReused]: HttpStatus.UNPROCESSABLE_ENTITY,
  [IdempotencyErrorCode.StoreUnavailable]: HttpStatus.SERVICE_UNAVAILABLE,
  [IdempotencyErrorCode.RecordUnreadable]: HttpStatus.INTERNAL_SERVER_ERROR,
};

/** The reason phrase of each status above, as Nest's error bodies carry it (`error`). */
export const HTTP_ERROR_NAME: Record<number, string> = {
  400: 'Bad Request',
  409: 'Conflict',
  422: 'Unprocessable Entity',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/**
 * Default base of the problem `type` URIs (option `problemDetails: true`): the package's
 * docs/errors.md, which has a heading per error code; the code, lower-cased, is its anchor.
 */
export const DEFAULT_PROBLEM_TYPE_BASE = 'https://unpkg.com/nestjs-idempotency/docs/errors.md#';

/** An RFC 9457 problem details body, as sent with the option `problemDetails`. */
export interface IdempotencyProblemDetails {
  /** URI of the problem type: the base (`typeBaseUri`) followed by the lower-cased `code`. */
  type: string;
  /** Short summary of the problem type; the same for every occurrence. */
  title: string;
  /** The HTTP status code (400, 409, 422, 500 or 503). */
  status: number;
  /** What went wrong in this occurrence. */
  detail: string;
  /** Stable error code, e.g. `IDEMPOTENCY_IN_PROGRESS` (an extension member). */
  code: IdempotencyErrorCode;
}
