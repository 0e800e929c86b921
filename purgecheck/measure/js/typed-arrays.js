// Seed 000's first workload: typed arrays, strings and Buffers of LO..HI bytes, written in
// full, one in KEEP_EVERY kept for good and the others dropped LIFETIME allocations later;
// the garbage collector is asked to run every 8 allocations (so a dropped object is freed
// soon after, as the seed's "freed eight allocations later"), and the event loop turns
// between them; with TURN_MS a turn takes at least that long, busy, without parking (the
// program with its objects at 1 byte at the real program's pace: docs/measure.md, "The
// runtime's own part"). (Bun.gc(false) asks; the collector collects far less often: every 150 to 170
// allocations on 2026-12-03, which collections.js counts.) Prints "load-start PID", then
// "load-end ALLOCATIONS KEPT_BYTES"; answers "stats" (collections.js); then idles until
// "quit" on stdin, stdin closing, or LIFETIME_MS.
import { loadEnded, statsLine, watch } from "./collections.js";
const env = process.env;
const N = Number(env.ALLOCATIONS ?? 3000), LO = Number(env.LO ?? 102400),
  HI = Number(env.HI ?? 512000), KEEP_EVERY = Number(env.KEEP_EVERY ?? 12),
  LIFETIME = Number(env.LIFETIME ?? 8), TURN_MS = Number(env.TURN_MS ?? 0);
let seed = Number(env.SEED ?? 1);
const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
setTimeout(() => process.exit(0), Number(env.LIFETIME_MS ?? 120000)).unref();
process.stdin.on("data", (d) => {
  if (String(d).includes("stats")) console.log(statsLine());
  if (String(d).includes("quit")) process.exit(0);
});
process.stdin.on("end", () => process.exit(0));
console.log(`load-start ${process.pid}`);
const kept = [], live = [];
let keptBytes = 0, turnStart = performance.now();
for (let i = 0; i < N; i++) {
  const size = LO + Math.floor(rnd() * (HI - LO + 1));
  let o;
  if (i % 3 === 0) { o = new Uint8Array(size); o.fill(1); }
  else if (i % 3 === 1) { o = Buffer.allocUnsafe(size); o.fill(2); }
  else { o = Buffer.alloc(size, 65).toString("latin1"); }
  if (i % KEEP_EVERY === 0) { kept.push(o); keptBytes += size; } else { live.push(o); watch(o); }
  if (live.length > LIFETIME) live.shift();
  if (i % 8 === 7) {
    while (performance.now() - turnStart < TURN_MS); // the pace alone: no allocation, no park
    Bun.gc(false);
    await new Promise((r) => setImmediate(r));
    turnStart = performance.now();
  }
}
loadEnded();
live.length = 0;
Bun.gc(true);
console.log(`load-end ${N} ${keptBytes}`);
setInterval(() => kept.length, 1 << 30); // stays alive, idle, until told to stop
