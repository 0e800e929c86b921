/* mutants.c: the run-time switches of the mutants of purgecheck/mutants.py and
 * purgecheck/hold_mutants.py (each Mutant's `c_switch`), so that conformance against the
 * clean model can kill them. Each switch breaks the one rule its Python twin breaks; the code
 * that honours it sits in the function the twin patches.
 */
#include <string.h>

#include "purge.h"

mi_mutant_t mi_mutant = M_NONE;

const char *const mi_mutant_names[M_COUNT] = {
    [M_NONE] = "none",
    [M_PURGED_LEFT_ON_LIST] = "purged_left_on_list",
    [M_FREE_IS_ZERO_KEPT] = "free_is_zero_kept",
    [M_UNIT_NEXT_TO_LIVE] = "unit_next_to_live",
    [M_UNIT_OUTSIDE_AREA] = "unit_outside_area",
    [M_UNPURGE_ALL_SKIPPED] = "unpurge_all_skipped",
    [M_UNIT_OS_PAGE] = "unit_os_page",
    [M_UNIT_BASE_UNALIGNED] = "unit_base_unaligned",
    [M_DOUBLE_FREE_ABSORBED] = "double_free_absorbed",
    [M_HUGE_PURGES] = "huge_purges",
    [M_ACCOUNTING_SKIPPED] = "accounting_skipped",
    [M_AGE_LT_1] = "age_lt_1",
    [M_AGE_NO_MODULO] = "age_no_modulo",
    [M_STAMP_NEVER_WRITTEN] = "stamp_never_written",
    [M_WALK_KEEPS_STAMP] = "walk_keeps_stamp",
    [M_PARK_DONE_FIRST] = "park_done_first",
    [M_PARK_UNBOUNDED] = "park_unbounded",
    [M_PARK_IGNORES_EPOCHS] = "park_ignores_epochs",
    [M_SWEEP_LAST_BEFORE_WORK] = "sweep_last_before_work",
    [M_EPOCH_NOT_RATE_LIMITED] = "epoch_not_rate_limited",
    [M_DOUBLE_INCREMENT] = "double_increment",
    [M_NO_HOLD_INLINE] = "no_hold_inline",
    [M_NO_CAS_EXCLUSION] = "no_cas_exclusion",
    [M_START_BEFORE_INCREMENT] = "start_before_increment",
    [M_EPOCH_PLAIN_READ] = "epoch_plain_read",
    [M_FULL_SWEEP_NEVER] = "full_sweep_never",
    [M_OPTION_OFF_IGNORED] = "option_off_ignored",
    [M_COLLECT_UNPURGES] = "collect_unpurges",
    [M_TAIL_FROM_LAST_BLOCK] = "tail_from_last_block",
    [M_UNPURGE_WITHOUT_REUSE] = "unpurge_without_reuse",
    [M_REBUILD_KEEPS_ORDER] = "rebuild_keeps_order",
    [M_FORK_CHILD_KEEPS_MOVING] = "fork_child_keeps_moving",
    [M_CLOCK_BACK_NOT_DUE] = "clock_back_not_due",
    [M_PURGED_STRADDLER_LIVE] = "purged_straddler_live",
    [M_AGE_SIGNED32] = "age_signed32",
    [M_UNIT_LAST_BLOCK_SHORT] = "unit_last_block_short",
    [M_PURGE_MAX_BLOCKS_CAP] = "purge_max_blocks_cap",
    [M_ALIGNED_AT_BLOCK_START] = "aligned_at_block_start",
    [M_SIZE_CLASS_WORD_LESS] = "size_class_word_less",
    [M_FULL_SWEEPS_UNCOUNTED] = "full_sweeps_uncounted",
    [M_ABANDON_OUTSIDE_LIN_STEP] = "abandon_outside_lin_step",
};

int mi_mutant_by_name(const char *name) {
    for (int m = 0; m < M_COUNT; m++)
        if (strcmp(mi_mutant_names[m], name) == 0) return m;
    return -1;
}
