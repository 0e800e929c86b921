/* geometry.c: size classes, page kinds and the purge unit (model/geometry.py).
 *
 * Seed 000, change (1): "mi_page_purge_unit(page) is the OS page where the block area of the
 * page then needs at most MI_PAGE_PURGE_BITS bits, and else the smallest power-of-two
 * multiple of the OS page for which it does". Offsets here are relative to the page's
 * region, which is 4 MiB-aligned, so align_down gives what it gives on absolute addresses.
 */
#include "purge.h"

const char *const mi_page_kind_names[4] = {"small", "medium", "large", "huge"};

int64_t mi_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;   /* Python's // rounds down */
    return q;
}

static int64_t align_down(int64_t x, int64_t a) { return x - (((x % a) + a) % a); }

int64_t mi_arena_slice_size(int arch_bits) { return arch_bits == 64 ? 64 * KiB : 32 * KiB; }

int64_t mi_page_size_of(mi_page_kind_t kind, int arch_bits) {
    int64_t slice = mi_arena_slice_size(arch_bits);
    switch (kind) {
    case MI_SMALL: return slice;
    case MI_MEDIUM: return 8 * slice;
    case MI_LARGE: return (arch_bits / 8) * 8 * slice;   /* 4 MiB on 64-bit, 1 MiB on 32 */
    default: return 0;
    }
}

static int64_t small_max_obj_size(int arch_bits) {
    return (mi_page_size_of(MI_SMALL, arch_bits) - (int64_t)MI_PAGE_OSPAGE_BLOCK_ALIGN2_BYTES) / 6;
}

int64_t mi_medium_max_obj_size(int arch_bits) {
    return (mi_page_size_of(MI_MEDIUM, arch_bits) - (int64_t)MI_PAGE_OSPAGE_BLOCK_ALIGN2_BYTES) / 6;
}

static int64_t large_max_obj_size(int arch_bits) { return mi_page_size_of(MI_LARGE, arch_bits) / 8; }

/* Four classes per power of two above 8 words (model: compute_block_size). */
int64_t mi_compute_block_size(int64_t size, int arch_bits) {
    int64_t word = arch_bits / 8;
    int64_t wsize = size <= 0 ? 1 : (size + word - 1) / word;
    if (wsize <= 8) return wsize * word;
    int64_t w = wsize - 1;
    int b = 63 - __builtin_clzll((unsigned long long)w);
    int64_t step = (int64_t)1 << (b - 2);
    int64_t bs = ((w >> (b - 2)) + 1) * step * word;
    return mi_mutant == M_SIZE_CLASS_WORD_LESS ? bs - word : bs;   /* broken: a word short */
}

mi_page_kind_t mi_compute_page_kind(int64_t block_size, int arch_bits) {
    if (block_size <= small_max_obj_size(arch_bits)) return MI_SMALL;
    if (block_size <= mi_medium_max_obj_size(arch_bits)) return MI_MEDIUM;
    if (block_size <= large_max_obj_size(arch_bits)) return MI_LARGE;
    return MI_HUGE;
}

/* End of the block area, relative: page_start + reserved * block_size. */
int64_t mi_geom_area_end(const mi_geom_t *g) { return g->offset + g->reserved * g->block_size; }

int64_t mi_compute_purge_unit(const mi_geom_t *g) {
    if (mi_mutant == M_UNIT_OS_PAGE) return g->os_page_size;
    int64_t unit = g->os_page_size, end = mi_geom_area_end(g);
    while (end - align_down(g->offset, unit) > MI_PAGE_PURGE_BITS * unit
           && unit < mi_arena_slice_size(g->arch_bits))
        unit *= 2;
    return unit;
}

/* Seed 000: "Bit k of page->purged names unit k, counted from align_down(page_start, unit)". */
int64_t mi_compute_unit_base(const mi_geom_t *g, int64_t unit) {
    if (mi_mutant == M_UNIT_BASE_UNALIGNED) return g->offset;
    return align_down(g->offset, unit);
}

int64_t mi_compute_purge_bits(const mi_geom_t *g, int64_t unit) {
    int64_t base = mi_compute_unit_base(g, unit);
    return (mi_geom_area_end(g) - base + unit - 1) / unit;
}

/* Digest 2: reserved > 1, not pinned, no custom commit, bits <= 256 (huge pages stay out). */
bool mi_page_can_purge_holes(const mi_geom_t *g) {
    if (mi_mutant == M_HUGE_PURGES) return true;
    if (g->reserved <= 1) return false;
    if (mi_mutant == M_PURGE_MAX_BLOCKS_CAP && g->reserved > MI_OLD_PURGE_MAX_BLOCKS) return false;
    return mi_compute_purge_bits(g, mi_compute_purge_unit(g)) <= MI_PAGE_PURGE_BITS;
}
