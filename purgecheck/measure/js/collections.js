// The garbage collector's collections as the program sees them: an object given to watch() is
// counted when the collector finalizes it (a FinalizationRegistry), and the callbacks of one
// collection run together, in one task, so a run of them is one collection. The harness asks
// with "stats" on stdin after the load and reads "gc FINALIZED COLLECTIONS SURVIVORS LATE", as
// they were at the end of the load (loadEnded()): how many of the program's objects the
// collector frees at once is the model's `gc_every` (docs/measure.md). Each object is numbered
// in the order it was dropped; one that a collection passed over (a later object was finalized
// by an earlier collection) and that a later collection frees is a survivor, and LATE counts
// the collections that freed survivors (JavaScriptCore keeps the object dropped last before a
// collection until a later, fuller one: the model's `survive_every` and `major_every`).
let finalized = 0, collections = 0, inCollection = false, atLoadEnd = null;
let dropped = 0, survivors = 0, late = 0, maxBefore = -1, maxNow = -1, lateNow = false;
const registry = new FinalizationRegistry((seq) => {
  finalized++;
  if (!inCollection) {
    inCollection = true;
    collections++;
    queueMicrotask(() => {
      inCollection = false;
      maxBefore = Math.max(maxBefore, maxNow);
      if (lateNow) late++;
      lateNow = false;
    });
  }
  if (seq < maxBefore) { survivors++; lateNow = true; }
  maxNow = Math.max(maxNow, seq);
});
export function watch(o) {
  if (typeof o === "object") registry.register(o, dropped++); // strings cannot be registered
}
export function loadEnded() {
  atLoadEnd = [finalized, collections, survivors, late];
}
export function statsLine() {
  const [f, c, s, l] = atLoadEnd ?? [finalized, collections, survivors, late];
  return `gc ${f} ${c} ${s} ${l}`;
}
