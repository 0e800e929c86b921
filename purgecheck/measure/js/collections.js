// The garbage collector's collections as the program sees them: an object given to watch() is
// counted when the collector finalizes it (a FinalizationRegistry), and the callbacks of one
// collection run together, in one task, so a run of them is one collection. The harness asks
// with "stats" on stdin after the load and reads "gc FINALIZED COLLECTIONS", as they were at
// the end of the load (loadEnded()): how many of the program's objects the collector frees
// at once is the model's `gc_every` (docs/measure.md).
let finalized = 0, collections = 0, inCollection = false, atLoadEnd = null;
const registry = new FinalizationRegistry(() => {
  finalized++;
  if (!inCollection) {
    inCollection = true;
    collections++;
    queueMicrotask(() => { inCollection = false; });
  }
});
export function watch(o) {
  if (typeof o === "object") registry.register(o, 0); // strings cannot be registered
}
export function loadEnded() {
  atLoadEnd = [finalized, collections];
}
export function statsLine() {
  const [f, c] = atLoadEnd ?? [finalized, collections];
  return `gc ${f} ${c}`;
}
