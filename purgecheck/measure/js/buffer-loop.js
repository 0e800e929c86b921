// Seed 000's loop that frees and takes SIZE-byte buffers: each round drops the BATCH buffers
// of the round before, asks the collector to free them, takes BATCH new ones and writes them
// in full, then waits STEP_MS for a timer (the event loop parks in between), for SECONDS.
// KEPT buffers taken first live to the end. Prints "load-start PID", "load-end ROUNDS", then
// idles until "quit" on stdin, stdin closing, or LIFETIME_MS; answers "stats" (collections.js).
import { loadEnded, statsLine, watch } from "./collections.js";
const env = process.env;
const SIZE = Number(env.SIZE ?? 262144), BATCH = Number(env.BATCH ?? 8),
  STEP_MS = Number(env.STEP_MS ?? 1), SECONDS = Number(env.SECONDS ?? 3),
  KEPT = Number(env.KEPT ?? 1);
setTimeout(() => process.exit(0), Number(env.LIFETIME_MS ?? 120000)).unref();
process.stdin.on("data", (d) => {
  if (String(d).includes("stats")) console.log(statsLine());
  if (String(d).includes("quit")) process.exit(0);
});
process.stdin.on("end", () => process.exit(0));
console.log(`load-start ${process.pid}`);
const kept = Array.from({ length: KEPT }, () => new Uint8Array(SIZE).fill(3));
let held = [], rounds = 0;
const end = performance.now() + SECONDS * 1000;
while (performance.now() < end) {
  held = [];
  Bun.gc(false);
  for (let i = 0; i < BATCH; i++) {
    const buffer = new Uint8Array(SIZE).fill(rounds & 255);
    watch(buffer);
    held.push(buffer);
  }
  rounds++;
  await new Promise((r) => setTimeout(r, STEP_MS));
}
loadEnded();
held = [];
Bun.gc(true);
console.log(`load-end ${rounds}`);
setInterval(() => kept.length, 1 << 30);
