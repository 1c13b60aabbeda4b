/**
 * Every `error.code` the service answers with, and the body of every error answer. The codes are
 * documented under "Errors" in docs/server.md (a test fails when one is missing there).
 */
import type { ValidationIssue } from "sluice/algorithms";

/** Every `error.code` the service answers with, by HTTP status. */
export const API_ERROR_CODES = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  policy_not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  too_many_requests: 429,
  store_unavailable: 503,
  database_unavailable: 503,
  shutting_down: 503,
  corrupt_record: 500,
  internal: 500,
} as const;

/** A code from {@link API_ERROR_CODES}. */
export type ApiErrorCode = keyof typeof API_ERROR_CODES;

/** The body of every error answer. */
export interface ApiErrorBody {
  error: { code: ApiErrorCode; message: string; issues?: ValidationIssue[] };
}
