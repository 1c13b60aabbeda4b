/**
 * Injection tokens and metadata keys. Symbols' descriptions name the package, so a token shown
 * in one of Nest's resolution errors says where it comes from.
 */

/** The module's options, as given (`forRoot`) or made by the factory (`forRootAsync`). */
export const SLUICE_OPTIONS = Symbol("@sluice/nest:options");

/** Metadata: the `@RateLimit` entries of a class or handler. */
export const RATE_LIMIT_METADATA = "sluice:rate-limit";
/** Metadata: the `@SkipRateLimit` entries of a class or handler (`true`: every policy). */
export const SKIP_METADATA = "sluice:skip";
/** Metadata: the `@RateLimitKey` function of a class or handler. */
export const KEY_METADATA = "sluice:key";
/** Metadata: the `@RateLimitCost` function (and settle) of a class or handler. */
export const COST_METADATA = "sluice:cost";

/** The `code` of a denial outside HTTP, unless the options say otherwise. */
export const DEFAULT_ERROR_CODE = "RATE_LIMITED";

/** The default memory store's cap on keys held at once (see `SluiceModuleOptions.maxKeys`). */
export const DEFAULT_MAX_KEYS = 100_000;
