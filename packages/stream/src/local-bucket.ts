// A per-connection token bucket, in memory: the cap that keeps one connection
// from taking its tenant's whole quota. It guards nothing global (the shared
// lease does), so it needs no Redis; it pays partially (takeUpTo) so that a
// frame larger than its capacity still passes, one refill at a time. The
// ground floor's MemoryBucket, under the stream's name.
import { MemoryBucket } from "@geoquota/core";

export { MemoryBucket as LocalBucket };
