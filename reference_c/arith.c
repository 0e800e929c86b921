/* arith.c: the unit arithmetic of the real tests' grids, on the C reference's own functions.
 *
 * `driver --arith GRID` writes one JSON line per (geometry, unit index) of GRID: whether unit k
 * lies wholly inside the formed blocks, and the first and last block that overlaps it (0 and 0
 * when it does not lie inside: the real code's convention). The values come from
 * mi_is_unit_inside_blocks and mi_blocks_of_unit, the functions the holes walk uses
 * (holes.c: is_unit_todo); purgecheck/arith.py computes the same lines with the model's
 * UnitMap and compares them. The grids are the facts of the fork's tests (digest section 11):
 *   large: units of 8, 16 and 64 KiB; blocks of 80..512 KiB; offsets 0, 4 KiB and 192 B; the
 *          capacity of a full 4 MiB page (test-purge-holes-large.c, "unit-arithmetic");
 *   small: OS pages of 4 and 16 KiB as the unit; blocks of 16 B..64 KiB; seven offsets;
 *          capacities 0, 1, 64 KiB and 512 KiB worth of blocks; two unit indices past the area
 *          (test-purge-holes.c, "os-page-arithmetic", which replaced "run-arithmetic").
 * Offsets are relative to a 4 MiB-aligned region, as everywhere in the reference.
 */
#include <stdio.h>
#include <string.h>

#include "purge.h"

static const int64_t LARGE_UNITS[] = {8 * KiB, 16 * KiB, 64 * KiB};
static const int64_t LARGE_BLOCKS[] = {80 * KiB, 96 * KiB, 112 * KiB, 128 * KiB, 160 * KiB,
                                       320 * KiB, 512 * KiB};
static const int64_t LARGE_OFFSETS[] = {0, 4 * KiB, 192};
static const int64_t SMALL_UNITS[] = {4 * KiB, 16 * KiB};
static const int64_t SMALL_BLOCKS[] = {16, 32, 64, 512, 1024, 4096, 8192, 10240, 10256, 16384,
                                       21856, 65536};
static const int64_t SMALL_OFFSETS[] = {0, 8, 64, 128, 4096, 8192, 12288};

#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

static int64_t align_down(int64_t x, int64_t a) { return x - x % a; }

/* One line per unit index k < nk of one geometry. */
static void emit_geometry(const char *grid, int64_t unit, int64_t bs, int64_t offset,
                          int64_t capacity, int64_t nk) {
    mi_page_t p;
    memset(&p, 0, sizeof p);
    p.geom.block_size = bs;
    p.geom.offset = offset;
    p.unit = unit;
    p.base = align_down(offset, unit);
    for (int64_t k = 0; k < nk; k++) {
        int64_t first = 0, last = 0;
        bool inside = mi_is_unit_inside_blocks(&p, k, capacity);
        if (inside) {
            int64_t i0, i1;
            mi_blocks_of_unit(&p, k, capacity, &i0, &i1);
            first = i0;
            last = i1 - 1;
        }
        printf("{\"ev\":\"unit_blocks\",\"grid\":\"%s\",\"unit\":%lld,\"block_size\":%lld,"
               "\"offset\":%lld,\"capacity\":%lld,\"k\":%lld,\"inside\":%s,\"first\":%lld,"
               "\"last\":%lld}\n", grid, (long long)unit, (long long)bs, (long long)offset,
               (long long)capacity, (long long)k, inside ? "true" : "false", (long long)first,
               (long long)last);
    }
}

int mi_arith_grid(const char *grid) {
    if (!strcmp(grid, "large")) {
        for (int u = 0; u < COUNT(LARGE_UNITS); u++)
            for (int b = 0; b < COUNT(LARGE_BLOCKS); b++)
                for (int o = 0; o < COUNT(LARGE_OFFSETS); o++) {
                    int64_t unit = LARGE_UNITS[u], bs = LARGE_BLOCKS[b], off = LARGE_OFFSETS[o];
                    int64_t cap = (4 * (int64_t)MiB - off) / bs;
                    int64_t span = off + cap * bs - align_down(off, unit);
                    emit_geometry(grid, unit, bs, off, cap, (span + unit - 1) / unit);
                }
    } else if (!strcmp(grid, "small")) {
        for (int u = 0; u < COUNT(SMALL_UNITS); u++)
            for (int b = 0; b < COUNT(SMALL_BLOCKS); b++)
                for (int o = 0; o < COUNT(SMALL_OFFSETS); o++) {
                    int64_t unit = SMALL_UNITS[u], bs = SMALL_BLOCKS[b], off = SMALL_OFFSETS[o];
                    int64_t caps[4] = {0, 1, 64 * (int64_t)KiB / bs, 512 * (int64_t)KiB / bs};
                    for (int c = 0; c < 4; c++)
                        emit_geometry(grid, unit, bs, off, caps[c],
                                      (caps[c] * bs + off % unit) / unit + 2);
                }
    } else {
        fprintf(stderr, "driver: --arith %s: expected large or small\n", grid);
        return 2;
    }
    fflush(stdout);
    return 0;
}
