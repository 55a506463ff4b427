// Uploads in progress per token (per `Authorization` header, as `cutpoint serve` counts them):
// one Durable Object per header, so that every isolate of the Worker counts against one limit
// (`max_uploads_per_token`, announced in GET /v1). Each upload, commit or part holds a lease
// that the Worker renews while the request runs and gives back at its end; a request that was
// killed (its isolate gone, its `finally` never run) stops renewing and its slot frees itself
// when the lease runs out (LEASE_MS). The leases are the object's memory only: the object is
// kept alive by the requests that renew them, and an object the runtime evicted held none.
import { DurableObject } from 'cloudflare:workers';

export const LEASE_MS = 60_000;
export const RENEW_MS = 20_000;

export class Uploads extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.held = new Map(); // lease id -> expiry (ms)
    this.seq = 0;
  }

  #expire() {
    const t = Date.now();
    for (const [id, until] of this.held) if (until <= t) this.held.delete(id);
  }

  /** A lease, or null when `max` are held. */
  take(max) {
    this.#expire();
    if (this.held.size >= max) return null;
    const id = `${Date.now().toString(36)}-${++this.seq}`;
    this.held.set(id, Date.now() + LEASE_MS);
    return id;
  }

  renew(id) {
    if (this.held.has(id)) this.held.set(id, Date.now() + LEASE_MS);
  }

  release(id) {
    this.held.delete(id);
  }

  /** Leases held now (tests). */
  count() {
    this.#expire();
    return this.held.size;
  }
}
