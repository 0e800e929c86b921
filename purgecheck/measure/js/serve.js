// Seed 000's server: Bun.serve on loopback that takes each request body (BODY bytes, sent by
// load.js) as one buffer and keeps KEPT of them, one every KEEP_EVERY requests, for good.
// The server with its bodies at 1 byte at the real server's pace (docs/measure.md, "The
// servers' small pages under load at the real pace"): with GC_EVERY the collector is asked
// (Bun.gc(false)) every that many requests, as the real bodies make it collect; with WORK_US
// a request takes at least that many microseconds, busy, before it answers.
// Prints "ready PID PORT"; on "stats" from stdin prints the collector's count (collections.js).
// Stops on "quit" from stdin, when stdin closes, or after LIFETIME_MS, whichever comes first
// (a measurement never leaves a server behind).
import { statsLine, watch } from "./collections.js";
const kept = [];
const KEPT = Number(process.env.KEPT ?? 40);
const KEEP_EVERY = Number(process.env.KEEP_EVERY ?? 1000);
const WORK_MS = Number(process.env.WORK_US ?? 0) / 1000;
const GC_EVERY = Number(process.env.GC_EVERY ?? 0);
let requests = 0;
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    const body = await req.arrayBuffer();
    const start = performance.now();
    while (performance.now() - start < WORK_MS); // the pace alone: no allocation
    requests++;
    if (kept.length < KEPT && requests % KEEP_EVERY === 0) kept.push(body);
    else watch(body);
    if (GC_EVERY && requests % GC_EVERY === 0) Bun.gc(false);
    return new Response(String(body.byteLength));
  },
});
setTimeout(() => process.exit(0), Number(process.env.LIFETIME_MS ?? 120000)).unref();
process.stdin.on("data", (d) => {
  if (String(d).includes("stats")) console.log(statsLine());
  if (String(d).includes("quit")) process.exit(0);
});
process.stdin.on("end", () => process.exit(0));
console.log(`ready ${process.pid} ${server.port}`);
