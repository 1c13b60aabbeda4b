/**
 * The first run: while no admin exists, `sluice serve` prints a one-time **setup token** (as
 * Grafana and Jenkins do), and whoever holds it creates the first admin in the browser
 * (`POST /v1/admin/setup`). The token lives in this node's memory only, as its SHA-256; it is
 * compared in constant time, works once, expires, and is refused as soon as any admin exists
 * (that last check is made in the same transaction that creates the admin).
 */
import { randomBytes } from "node:crypto";
import { secretMatches, sha256 } from "./secrets.js";

/** How long a setup token works: an hour. */
export const SETUP_TOKEN_TTL_MS = 3_600_000;

/** Why a setup token was refused, or `ok`. */
export type SetupCheck = "ok" | "none" | "expired" | "wrong";

/** This node's setup token; see the module comment. */
export class SetupToken {
  private hash: string | undefined;
  private expiresAt = 0;

  constructor(
    private readonly now: () => number = Date.now,
    private readonly ttlMs = SETUP_TOKEN_TTL_MS,
  ) {}

  /** Issues a new token (the one before stops working); returns it, to be printed once. */
  issue(): { token: string; expiresAt: Date } {
    const token = `su_${randomBytes(24).toString("base64url")}`;
    this.hash = sha256(token);
    this.expiresAt = this.now() + this.ttlMs;
    return { token, expiresAt: new Date(this.expiresAt) };
  }

  /**
   * Takes a token issued by another process of this node (a worker of `sluice serve
   * --workers`), so that it works whichever process a request reaches.
   */
  adopt(token: string, expiresAt: number): void {
    this.hash = sha256(token);
    this.expiresAt = expiresAt;
  }

  /** Whether a token was issued on this node and is still usable. */
  get active(): boolean {
    return this.hash !== undefined && this.now() < this.expiresAt;
  }

  /** Checks a presented token (constant time). */
  check(presented: string): SetupCheck {
    if (this.hash === undefined) return "none";
    // Compared before the expiry is looked at, so the timing says nothing about either.
    const matches = secretMatches(presented, this.hash);
    if (this.now() >= this.expiresAt) return "expired";
    return matches ? "ok" : "wrong";
  }

  /** Forgets the token (it has been used, or an admin exists). */
  revoke(): void {
    this.hash = undefined;
    this.expiresAt = 0;
  }
}
