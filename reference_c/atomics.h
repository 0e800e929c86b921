/* atomics.h: the C11 atomic accesses of the epoch, the stamp and the park handoff, behind one
 * header (as the real allocator keeps its atomics behind atomic.h), so that the same source
 * (protocol.h) builds two ways:
 *   - the normal build (C11): <stdatomic.h>, atomic_*_explicit;
 *   - the Relacy build (C++, MI_RELACY defined; reference_c/relacy/): rl::atomic<T> with
 *     Relacy's memory orders, so that its scheduler explores the weak executions.
 *
 * Each access of the protocol has its ordering here, named after proofs/weak (protocol.py
 * Orderings, park.py ParkOrderings), at the C reference's value. The unsafe one-step
 * weakenings of docs/proofs.md ("Minimal orderings") are switches: building with
 * -DMI_WEAKEN_<ACCESS> gives that access its weaker ordering MI_WEAKER_<ACCESS> (the kill
 * matrix's weak mutants, purgecheck/mutants/catalogue/weak.py); a build that defines
 * MI_WEAKENED(ACCESS) before this header chooses it at run time instead (the Relacy build:
 * `relacy_check ... --weaken ACCESS`, so that one build judges every weakening).
 */
#ifndef MI_ATOMICS_H
#define MI_ATOMICS_H

#ifdef MI_RELACY
#include <relacy/relacy.hpp>
#define mi_atomic(T) rl::atomic<T>
typedef rl::memory_order mi_memory_order;
#define MI_RELAXED rl::mo_relaxed
#define MI_ACQUIRE rl::mo_acquire
#define MI_RELEASE rl::mo_release
#define MI_ACQ_REL rl::mo_acq_rel
#define MI_SEQ_CST rl::mo_seq_cst
#define mi_atomic_load(p, mo) ((p)->load((mo), $))
#define mi_atomic_store(p, v, mo) ((p)->store((v), (mo), $))
#define mi_atomic_cas(p, expected, desired, mo, fail_mo) \
    ((p)->compare_exchange_strong(*(expected), (desired), (mo), $, (fail_mo), $))
#define mi_atomic_fetch_add(p, v, mo) ((p)->fetch_add((v), (mo), $))
#else
#include <stdatomic.h>
#define mi_atomic(T) _Atomic(T)
typedef memory_order mi_memory_order;
#define MI_RELAXED memory_order_relaxed
#define MI_ACQUIRE memory_order_acquire
#define MI_RELEASE memory_order_release
#define MI_ACQ_REL memory_order_acq_rel
#define MI_SEQ_CST memory_order_seq_cst
#define mi_atomic_load(p, mo) atomic_load_explicit((p), (mo))
#define mi_atomic_store(p, v, mo) atomic_store_explicit((p), (v), (mo))
#define mi_atomic_cas(p, expected, desired, mo, fail_mo) \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired), (mo), (fail_mo))
#define mi_atomic_fetch_add(p, v, mo) atomic_fetch_add_explicit((p), (v), (mo))
#endif

/* An access that has an unsafe weakening: its weaker ordering when MI_WEAKENED(access) holds
 * at run time, `order` otherwise (always, in a build without MI_WEAKENED). */
#ifdef MI_WEAKENED
#define MI_WEAKENABLE(access, order) (MI_WEAKENED(access) ? MI_WEAKER_##access : (order))
#else
#define MI_WEAKENABLE(access, order) order
#endif

/* -- the epoch advance (digest 7), the forked-child rule, the sweep's read of the epoch (6.2) - */
#define MI_WEAKER_LOAD_START MI_RELAXED   /* unsafe: EP-SEES-STARTED */
#ifdef MI_WEAKEN_LOAD_START
#define MI_ORDER_LOAD_START MI_WEAKER_LOAD_START
#else
#define MI_ORDER_LOAD_START MI_WEAKENABLE(LOAD_START, MI_ACQUIRE)  /* load_acquire(start) */
#endif
#define MI_ORDER_CAS MI_ACQ_REL            /* the claim: holds relaxed (docs/proofs.md) */
#define MI_ORDER_CAS_FAIL MI_ACQUIRE
/* unsafe with a fork: EP-NO-SHORT-EPOCH (the weak explorer; Relacy has no fork) */
#define MI_WEAKER_FETCH_ADD MI_ACQUIRE
#ifdef MI_WEAKEN_FETCH_ADD
#define MI_ORDER_FETCH_ADD MI_WEAKER_FETCH_ADD
#else
/* the increment: release, needed by a fork's copy */
#define MI_ORDER_FETCH_ADD MI_WEAKENABLE(FETCH_ADD, MI_ACQ_REL)
#endif
#define MI_WEAKER_STORE_START MI_RELAXED   /* unsafe: EP-SEES-STARTED */
#ifdef MI_WEAKEN_STORE_START
#define MI_ORDER_STORE_START MI_WEAKER_STORE_START
#else
#define MI_ORDER_STORE_START MI_WEAKENABLE(STORE_START, MI_RELEASE)  /* store_release(start, now2) */
#endif
#define MI_WEAKER_SPIN_LOAD MI_RELAXED   /* unsafe: EP-SEES-STARTED */
#ifdef MI_WEAKEN_SPIN_LOAD
#define MI_ORDER_SPIN_LOAD MI_WEAKER_SPIN_LOAD
#else
#define MI_ORDER_SPIN_LOAD MI_WEAKENABLE(SPIN_LOAD, MI_ACQUIRE)  /* the MOVING spin */
#endif
#define MI_ORDER_SWEEP_EPOCH MI_ACQUIRE    /* the sweep's epoch read */
#define MI_ORDER_FORK_CAS MI_SEQ_CST       /* the forked-child rule's CAS MOVING -> now (the real */
#define MI_ORDER_FORK_CAS_FAIL MI_SEQ_CST  /* code: a relaxed load, a store-release) */
#define MI_ORDER_STAMP_LOAD MI_RELAXED     /* digest 5: the stamp's relaxed load */

/* -- the park handoff (digest 8; reference_c/park.c) -----------------------------------------
 * park.c's plain atomic_load/atomic_store are seq_cst. -DMI_HANDOFF_ACQ_REL makes them acquire
 * and release: the baseline from which the handoff's weakenings are judged (proofs/weak's
 * seq_cst is stronger than RC11's, and so is Relacy's: a seq_cst load reads the latest seq_cst
 * store, which hides a missing release or acquire elsewhere). */
#ifdef MI_HANDOFF_ACQ_REL
#define MI_HANDOFF_LOAD MI_ACQUIRE
#define MI_HANDOFF_STORE MI_RELEASE
#else
#define MI_HANDOFF_LOAD MI_SEQ_CST
#define MI_HANDOFF_STORE MI_SEQ_CST
#endif
#define MI_ORDER_PARK_LOAD_STATE MI_HANDOFF_LOAD
#define MI_ORDER_PARK_STORE_RECLAIM MI_HANDOFF_STORE
#define MI_ORDER_PARK_STORE_SWEPT MI_HANDOFF_STORE
#define MI_WEAKER_PARK_CAS MI_ACQUIRE   /* unsafe (from the acquire/release baseline) */
#ifdef MI_WEAKEN_PARK_CAS
#define MI_ORDER_PARK_CAS MI_WEAKER_PARK_CAS
#else
#define MI_ORDER_PARK_CAS MI_WEAKENABLE(PARK_CAS, MI_ACQ_REL)  /* RUNNING -> PARKED */
#endif
#define MI_ORDER_PARK_CAS_FAIL MI_ACQUIRE
#define MI_ORDER_UNPARK_LOAD_STATE MI_ACQUIRE
#define MI_ORDER_UNPARK_STORE_RECLAIM MI_HANDOFF_STORE
#define MI_WEAKER_UNPARK_CAS MI_RELEASE   /* unsafe: PK-HANDOFF-FRESH */
#ifdef MI_WEAKEN_UNPARK_CAS
#define MI_ORDER_UNPARK_CAS MI_WEAKER_UNPARK_CAS
#else
#define MI_ORDER_UNPARK_CAS MI_WEAKENABLE(UNPARK_CAS, MI_ACQ_REL)  /* PARKED -> RUNNING */
#endif
#define MI_ORDER_UNPARK_CAS_FAIL MI_ACQUIRE
#define MI_ORDER_SCAV_LOAD_STATE MI_ACQUIRE
#define MI_ORDER_SCAV_LOAD_SWEPT MI_HANDOFF_LOAD
#define MI_ORDER_SCAV_LOAD_LAST MI_HANDOFF_LOAD
#define MI_WEAKER_CLAIM_CAS MI_RELEASE   /* unsafe (from the acquire/release baseline) */
#ifdef MI_WEAKEN_CLAIM_CAS
#define MI_ORDER_CLAIM_CAS MI_WEAKER_CLAIM_CAS
#else
#define MI_ORDER_CLAIM_CAS MI_WEAKENABLE(CLAIM_CAS, MI_ACQ_REL)  /* PARKED -> SWEEPING */
#endif
#define MI_ORDER_CLAIM_CAS_FAIL MI_ACQUIRE
#define MI_ORDER_CLAIM_LOAD_SWEPT MI_HANDOFF_LOAD
#define MI_ORDER_STORE_DEFERRED MI_HANDOFF_STORE
#define MI_ORDER_STORE_LAST MI_HANDOFF_STORE
#define MI_ORDER_STORE_SWEPT MI_HANDOFF_STORE
#define MI_WEAKER_RELEASE_STATE MI_RELAXED   /* unsafe: HD-INTERVAL, PK-HANDOFF-FRESH */
#ifdef MI_WEAKEN_RELEASE_STATE
#define MI_ORDER_RELEASE_STATE MI_WEAKER_RELEASE_STATE
#else
#define MI_ORDER_RELEASE_STATE MI_WEAKENABLE(RELEASE_STATE, MI_RELEASE)  /* SWEEPING -> PARKED */
#endif

#endif
