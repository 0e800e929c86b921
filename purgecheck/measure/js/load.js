// The load of seed 000's server: CONNECTIONS requests open at a time, each a POST of BODY
// bytes to 127.0.0.1:PORT, for SECONDS; prints "requests N errors E" and exits.
const [port, connections, seconds, bodyBytes] = process.argv.slice(2).map(Number);
const body = new Uint8Array(bodyBytes).fill(7);
const end = performance.now() + seconds * 1000;
let requests = 0, errors = 0;
async function connection() {
  while (performance.now() < end) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/`, { method: "POST", body });
      if ((await r.text()) === String(bodyBytes)) requests++; else errors++;
    } catch { errors++; }
  }
}
await Promise.all(Array.from({ length: connections }, connection));
console.log(`requests ${requests} errors ${errors}`);
