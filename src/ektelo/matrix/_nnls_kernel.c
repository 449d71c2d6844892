/* The per-parent step of the tree NNLS (ektelo/matrix/tree_nnls.py), four
 * parents at a time in AVX2 registers: sort each parent's cells by a
 * sorting network, then put the parent on the segment its G falls in.
 *
 * With a parent's cells sorted, u_0 ≤ … ≤ u_{K−1}, its breakpoints are
 *
 *     S_i = Σ_{l>i} (u_l − u_i),    B_i = p·u_i − p_v·S_i,
 *
 * made monotone (B_i ← max(B_i, B_{i−1})) so that rounding at tied cells
 * cannot put them out of order; c = #{i : B_i ≤ G} cells are at 0 (at least
 * the parent's pads), its range is [B_{c−1}, B_c) (−∞ below its pads, +∞
 * above the last cell) and its line, with j = K − c free cells,
 *
 *     β = j / (p + j·p_v),    α = S_c + β·(B_c + w_v·y_v)   (0, 0 when j = 0).
 *
 * Exactly `_Parents._place` of tree_nnls.py, which is the reference this is
 * tested against. Rows are K ∈ {2, 4, 8, 16} doubles; a parent's pads (cells
 * held at 0) arrive as −∞ and sort first, where they take the value of its
 * smallest cell (in the sorted rows stored too) so that every product stays
 * finite.
 *
 * Loaded with ctypes (the module init below only makes the library
 * importable, so Python can find it); callers check `nnls_kernel_ready()`
 * (the CPU has AVX2 and FMA) before any other call.
 */
#include <Python.h>
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static struct PyModuleDef kernel_module = {PyModuleDef_HEAD_INIT, "_nnls_kernel", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__nnls_kernel(void) { return PyModule_Create(&kernel_module); }

int nnls_kernel_ready(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* Batcher's odd–even merge sort (the comparators of tree_nnls._network). */
static const int8_t NET2[][2] = {{0, 1}};
static const int8_t NET4[][2] = {{0, 1}, {2, 3}, {0, 2}, {1, 3}, {1, 2}};
static const int8_t NET8[][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {0, 2}, {1, 3}, {4, 6},
                                 {5, 7}, {1, 2}, {5, 6}, {0, 4}, {1, 5}, {2, 6}, {3, 7},
                                 {2, 4}, {3, 5}, {1, 2}, {3, 4}, {5, 6}};
static const int8_t NET16[][2] = {
    {0, 1},   {2, 3},   {4, 5},   {6, 7},   {8, 9},   {10, 11}, {12, 13}, {14, 15},
    {0, 2},   {1, 3},   {4, 6},   {5, 7},   {8, 10},  {9, 11},  {12, 14}, {13, 15},
    {1, 2},   {5, 6},   {9, 10},  {13, 14}, {0, 4},   {1, 5},   {2, 6},   {3, 7},
    {8, 12},  {9, 13},  {10, 14}, {11, 15}, {2, 4},   {3, 5},   {10, 12}, {11, 13},
    {1, 2},   {3, 4},   {5, 6},   {9, 10},  {11, 12}, {13, 14}, {0, 8},   {1, 9},
    {2, 10},  {3, 11},  {4, 12},  {5, 13},  {6, 14},  {7, 15},  {4, 8},   {5, 9},
    {6, 10},  {7, 11},  {2, 4},   {3, 5},   {6, 8},   {7, 9},   {10, 12}, {11, 13},
    {1, 2},   {3, 4},   {5, 6},   {7, 8},   {9, 10},  {11, 12}, {13, 14}};

#define AVX __attribute__((target("avx2,fma"), always_inline)) static inline

/* 4×4 transpose: rows a..d (four parents' cells k..k+3) ↔ cells a..d. */
AVX void transpose4(__m256d *a, __m256d *b, __m256d *c, __m256d *d) {
    __m256d t0 = _mm256_unpacklo_pd(*a, *b), t1 = _mm256_unpackhi_pd(*a, *b);
    __m256d t2 = _mm256_unpacklo_pd(*c, *d), t3 = _mm256_unpackhi_pd(*c, *d);
    *a = _mm256_permute2f128_pd(t0, t2, 0x20);
    *b = _mm256_permute2f128_pd(t1, t3, 0x20);
    *c = _mm256_permute2f128_pd(t0, t2, 0x31);
    *d = _mm256_permute2f128_pd(t1, t3, 0x31);
}

/* Four parents: v[k] holds cell k of each (lane = parent). */
typedef struct {
    __m256d g, wy, own, pads;
} Quad;

typedef struct {
    __m256d alpha, beta, lo, hi;
} Placed;

AVX Placed place4(__m256d *v, int K, Quad q, double p) {
    const __m256d vp = _mm256_set1_pd(p), ninf = _mm256_set1_pd(-INFINITY);
    const __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
    __m256d above[16];
    __m256d total = zero;
#pragma GCC unroll 16
    for (int k = K - 1; k >= 0; k--) {
        above[k] = total;
        total = _mm256_add_pd(total, v[k]);
    }
    __m256d prev = ninf, lo = ninf, hi = _mm256_set1_pd(INFINITY), S_c = zero, found = zero;
    __m256d count = zero;
#pragma GCC unroll 16
    for (int k = 0; k < K; k++) {
        __m256d S = _mm256_fnmadd_pd(_mm256_set1_pd((double)(K - 1 - k)), v[k], above[k]);
        __m256d B = _mm256_max_pd(_mm256_fnmadd_pd(q.own, S, _mm256_mul_pd(vp, v[k])), prev);
        prev = B;
        __m256d real = _mm256_cmp_pd(_mm256_set1_pd((double)k), q.pads, _CMP_GE_OQ);
        __m256d over = _mm256_and_pd(_mm256_cmp_pd(B, q.g, _CMP_GT_OQ), real);
        __m256d first = _mm256_andnot_pd(found, over);
        hi = _mm256_blendv_pd(hi, B, first);
        S_c = _mm256_blendv_pd(S_c, S, first);
        found = _mm256_or_pd(found, over);
        __m256d below = _mm256_andnot_pd(found, real); /* B_k ≤ G, not a pad */
        lo = _mm256_blendv_pd(lo, B, below);
        count = _mm256_add_pd(count, _mm256_andnot_pd(found, one));
    }
    __m256d free = _mm256_sub_pd(_mm256_set1_pd((double)K), count);
    __m256d none = _mm256_cmp_pd(free, zero, _CMP_EQ_OQ);
    __m256d beta = _mm256_div_pd(free, _mm256_fmadd_pd(free, q.own, vp));
    __m256d alpha = _mm256_fmadd_pd(beta, _mm256_add_pd(hi, q.wy), S_c);
    Placed out = {_mm256_blendv_pd(alpha, zero, none), _mm256_blendv_pd(beta, zero, none), lo,
                  hi};
    return out;
}

/* Sort v[0..K) within each lane. */
AVX void sort4(__m256d *v, int K) {
    const int8_t(*net)[2] = K == 2 ? NET2 : K == 4 ? NET4 : K == 8 ? NET8 : NET16;
    int n = K == 2 ? 1 : K == 4 ? 5 : K == 8 ? 19 : 63;
#pragma GCC unroll 64
    for (int c = 0; c < n; c++) {
        __m256d a = v[net[c][0]], b = v[net[c][1]];
        v[net[c][0]] = _mm256_min_pd(a, b);
        v[net[c][1]] = _mm256_max_pd(a, b);
    }
}

/* Pads (−∞, sorted first) take the value of the smallest real cell. */
AVX void fill_pads(__m256d *v, int K) {
    const __m256d ninf = _mm256_set1_pd(-INFINITY);
#pragma GCC unroll 16
    for (int k = K - 2; k >= 0; k--)
        v[k] = _mm256_blendv_pd(v[k], v[k + 1], _mm256_cmp_pd(v[k], ninf, _CMP_EQ_OQ));
}

/* Rows of 2: [r0 r1 | r2 r3] pairs ↔ cell 0 and cell 1 of the four rows. */
AVX void load_pairs(__m256d *v, const double *const rows[4]) {
    __m256d a = _mm256_set_m128d(_mm_loadu_pd(rows[1]), _mm_loadu_pd(rows[0]));
    __m256d b = _mm256_set_m128d(_mm_loadu_pd(rows[3]), _mm_loadu_pd(rows[2]));
    /* unpack gives rows in the order 0 2 1 3 */
    v[0] = _mm256_permute4x64_pd(_mm256_unpacklo_pd(a, b), 0xD8);
    v[1] = _mm256_permute4x64_pd(_mm256_unpackhi_pd(a, b), 0xD8);
}

AVX void store_pairs(const __m256d *v, double *const rows[4]) {
    __m256d c0 = _mm256_permute4x64_pd(v[0], 0xD8), c1 = _mm256_permute4x64_pd(v[1], 0xD8);
    __m256d a = _mm256_unpacklo_pd(c0, c1), b = _mm256_unpackhi_pd(c0, c1);
    _mm_storeu_pd(rows[0], _mm256_castpd256_pd128(a));
    _mm_storeu_pd(rows[1], _mm256_extractf128_pd(a, 1));
    _mm_storeu_pd(rows[2], _mm256_castpd256_pd128(b));
    _mm_storeu_pd(rows[3], _mm256_extractf128_pd(b, 1));
}

AVX void load_rows(__m256d *v, const double *const rows[4], int K) {
    if (K == 2) {
        load_pairs(v, rows);
        return;
    }
#pragma GCC unroll 4
    for (int k = 0; k < K; k += 4) {
        v[k] = _mm256_loadu_pd(rows[0] + k);
        v[k + 1] = _mm256_loadu_pd(rows[1] + k);
        v[k + 2] = _mm256_loadu_pd(rows[2] + k);
        v[k + 3] = _mm256_loadu_pd(rows[3] + k);
        transpose4(&v[k], &v[k + 1], &v[k + 2], &v[k + 3]);
    }
}

AVX void store_rows(const __m256d *v, double *const rows[4], int K) {
    if (K == 2) {
        store_pairs(v, rows);
        return;
    }
#pragma GCC unroll 4
    for (int k = 0; k < K; k += 4) {
        __m256d a = v[k], b = v[k + 1], c = v[k + 2], d = v[k + 3];
        transpose4(&a, &b, &c, &d);
        _mm256_storeu_pd(rows[0] + k, a);
        _mm256_storeu_pd(rows[1] + k, b);
        _mm256_storeu_pd(rows[2] + k, c);
        _mm256_storeu_pd(rows[3] + k, d);
    }
}

/* Four parents' cells gathered from the leaves themselves: parent l's
 * K − pads[l] cells start at leaves + start[l] and fill the last places of
 * its row; the first pads[l] places are −∞. Masked loads read no cell
 * outside the parent (so none past either end of the leaves). */
AVX void load_runs(__m256d *v, const double *leaves, const ptrdiff_t start[4],
                   const int pad[4], int K) {
    const __m256d ninf = _mm256_set1_pd(-INFINITY);
#pragma GCC unroll 4
    for (int k = 0; k < K; k += 4) {
        const __m256i place = _mm256_setr_epi64x(k, k + 1, k + 2, k + 3);
        for (int l = 0; l < 4; l++) {
            __m256i real = _mm256_cmpgt_epi64(place, _mm256_set1_epi64x(pad[l] - 1));
            if (K < 4) /* (rows of 2: places 2 and 3 are not the parent's) */
                real = _mm256_andnot_si256(_mm256_cmpgt_epi64(place, _mm256_set1_epi64x(K - 1)),
                                           real);
            /* (address arithmetic in integers: below the leaves where masked) */
            const double *from =
                (const double *)((uintptr_t)leaves + 8 * (uintptr_t)(start[l] - pad[l] + k));
            v[k + l] = _mm256_blendv_pd(ninf, _mm256_maskload_pd(from, real),
                                        _mm256_castsi256_pd(real));
        }
        transpose4(&v[k], &v[k + 1], &v[k + 2], &v[k + 3]);
    }
}

/* Parents t = 0..m−1 (parent index: index[t], or t without an index):
 *   cells   when sorting: with run = 0, rows of K at cells + K·parent;
 *           with run > 0, the leaves, the parent's K − pads cells ending
 *           at ends[parent] (or starting at run·parent without ends);
 *           scaled by `scale`;
 *   sorted  where the sorted rows go (sort != 0) or are read from (sort == 0);
 *   g, wy, own, pads  per parent (own may be NULL: own_all; pads may be NULL);
 *   alpha, beta, lo, hi  written at the parent's index;
 *   extremes  when sorting (may be NULL): the sorted cells' max and min and,
 *             with `below` per parent, max (p·largest cell − below) and
 *             min (p·smallest cell − below), folded into [0..3] (the
 *             scale of the problem, ‖Aᵀy‖∞, without another pass).
 * Every array is indexed by the parent's index, so a call can place any
 * subset of the parents. K is a constant in each instance (the network and
 * the loops unroll, and the cells stay in registers). */
#define PLACE_ARGS                                                                         \
    int sort, ptrdiff_t m, const ptrdiff_t *index, const double *cells, ptrdiff_t run,     \
        const ptrdiff_t *ends, double scale,                                               \
        double *sorted, const double *g, const double *wy, double p, double own_all,       \
        const double *own, const uint8_t *pads, double *alpha, double *beta, double *lo,   \
        double *hi, const double *below, double *extremes

AVX void place_rows(const int K, PLACE_ARGS) {
    const __m256d vs = _mm256_set1_pd(scale), vp = _mm256_set1_pd(p);
    __m256d top = _mm256_set1_pd(-INFINITY), bottom = _mm256_set1_pd(INFINITY);
    __m256d top_entry = top, bottom_entry = bottom;
    double spare[4][16];
    for (ptrdiff_t t = 0; t < m; t += 4) {
        ptrdiff_t at[4];
        int lanes = m - t < 4 ? (int)(m - t) : 4;
        for (int l = 0; l < 4; l++) {
            ptrdiff_t r = t + (l < lanes ? l : lanes - 1); /* a short quad repeats its last */
            at[l] = index ? index[r] : r;
        }
        const double *in[4];
        double *out[4];
        for (int l = 0; l < 4; l++) {
            in[l] = (sort ? cells : sorted) + K * at[l];
            out[l] = l < lanes ? sorted + K * at[l] : spare[l];
        }
        __m256d v[16];
        if (sort && run > 0) {
            ptrdiff_t start[4];
            int pad[4];
            for (int l = 0; l < 4; l++) {
                pad[l] = pads ? pads[at[l]] : 0;
                start[l] = ends ? ends[at[l]] - (K - pad[l]) : run * at[l];
            }
            load_runs(v, cells, start, pad, K);
        } else {
            load_rows(v, in, K);
        }
        if (sort) {
#pragma GCC unroll 16
            for (int k = 0; k < K; k++) v[k] = _mm256_mul_pd(v[k], vs);
            sort4(v, K);
            fill_pads(v, K);
            store_rows(v, out, K);
            if (extremes) { /* (a short quad's repeated lanes change nothing) */
                __m256d b = _mm256_setr_pd(below[at[0]], below[at[1]], below[at[2]],
                                           below[at[3]]);
                top = _mm256_max_pd(top, v[K - 1]);
                bottom = _mm256_min_pd(bottom, v[0]);
                top_entry = _mm256_max_pd(top_entry, _mm256_sub_pd(_mm256_mul_pd(vp, v[K - 1]), b));
                bottom_entry = _mm256_min_pd(bottom_entry, _mm256_sub_pd(_mm256_mul_pd(vp, v[0]), b));
            }
        }
        Quad q;
        q.g = _mm256_setr_pd(g[at[0]], g[at[1]], g[at[2]], g[at[3]]);
        q.wy = _mm256_setr_pd(wy[at[0]], wy[at[1]], wy[at[2]], wy[at[3]]);
        q.own = own ? _mm256_setr_pd(own[at[0]], own[at[1]], own[at[2]], own[at[3]])
                    : _mm256_set1_pd(own_all);
        q.pads = pads ? _mm256_setr_pd(pads[at[0]], pads[at[1]], pads[at[2]], pads[at[3]])
                      : _mm256_setzero_pd();
        Placed r = place4(v, K, q, p);
        double a[4], b[4], l_[4], h[4];
        _mm256_storeu_pd(a, r.alpha);
        _mm256_storeu_pd(b, r.beta);
        _mm256_storeu_pd(l_, r.lo);
        _mm256_storeu_pd(h, r.hi);
        for (int l = 0; l < lanes; l++) {
            alpha[at[l]] = a[l];
            beta[at[l]] = b[l];
            lo[at[l]] = l_[l];
            hi[at[l]] = h[l];
        }
    }
    if (sort && extremes) {
        double t[4], u[4], te[4], be[4];
        _mm256_storeu_pd(t, top);
        _mm256_storeu_pd(u, bottom);
        _mm256_storeu_pd(te, top_entry);
        _mm256_storeu_pd(be, bottom_entry);
        for (int l = 0; l < 4; l++) {
            extremes[0] = t[l] > extremes[0] ? t[l] : extremes[0];
            extremes[1] = u[l] < extremes[1] ? u[l] : extremes[1];
            extremes[2] = te[l] > extremes[2] ? te[l] : extremes[2];
            extremes[3] = be[l] < extremes[3] ? be[l] : extremes[3];
        }
    }
}

#define CALL_ARGS                                                                          \
    sort, m, index, cells, run, ends, scale, sorted, g, wy, p, own_all, own, pads, alpha, \
        beta, lo, hi, below, extremes

__attribute__((target("avx2,fma"))) static void place_rows2(PLACE_ARGS) {
    place_rows(2, CALL_ARGS);
}
__attribute__((target("avx2,fma"))) static void place_rows4(PLACE_ARGS) {
    place_rows(4, CALL_ARGS);
}
__attribute__((target("avx2,fma"))) static void place_rows8(PLACE_ARGS) {
    place_rows(8, CALL_ARGS);
}
__attribute__((target("avx2,fma"))) static void place_rows16(PLACE_ARGS) {
    place_rows(16, CALL_ARGS);
}

/* K ∈ {2, 4, 8, 16}: the width of the rows (see place_rows). */
void nnls_place(int K, PLACE_ARGS) {
    if (K == 2)
        place_rows2(CALL_ARGS);
    else if (K == 4)
        place_rows4(CALL_ARGS);
    else if (K == 8)
        place_rows8(CALL_ARGS);
    else
        place_rows16(CALL_ARGS);
}

/* The estimate's cells, x = max(scale·leaf − τ of its parent, 0), over the
 * sorted rows' memory, and each parent's total of them (one pass: the
 * totals are summed while the parent's cells are in registers). Parent i's
 * cells end at ends[i], or are cells [run·i, run·(i + 1)) without ends.
 * Plain C (no FMA): the same roundings as NumPy's multiply, then subtract. */
void nnls_cells(ptrdiff_t P, const double *leaves, ptrdiff_t run, const ptrdiff_t *ends,
                double scale, const double *tau, double *x, double *totals) {
    ptrdiff_t start = 0;
    for (ptrdiff_t i = 0; i < P; i++) {
        ptrdiff_t end = ends ? ends[i] : start + run;
        double shift = tau[i], total = 0.0;
        for (ptrdiff_t j = start; j < end; j++) {
            /* (maxsd: a branch on the sign mispredicts on sparse data) */
            __m128d v0 = _mm_set_sd(scale * leaves[j] - shift);
            double v = _mm_cvtsd_f64(_mm_max_sd(v0, _mm_setzero_pd()));
            x[j] = v;
            total += v;
        }
        totals[i] = total;
        start = end;
    }
}

/* Grandparents of k parents each, in 1-D (grandparent g's parents are
 * g·k … g·k + k − 1); g = rows[i], or first + i without rows, i < count.
 * Its children's G all equal Φ_g + below_v, so every child keeps its
 * segment iff Φ_g ∈ [low_g, high_g):
 *
 *     low_g = max_v (lo_v − below_v),   high_g = min_v (hi_v − below_v),
 *
 * written with the sums of the children's lines, Σα and Σβ (the
 * grandparent's own estimate in a tree solve). */
void nnls_group(ptrdiff_t k, ptrdiff_t count, const ptrdiff_t *rows, ptrdiff_t first,
                const double *alpha, const double *beta, const double *lo, const double *hi,
                const double *below, double *sum_alpha, double *sum_beta, double *low,
                double *high) {
    for (ptrdiff_t i = 0; i < count; i++) {
        ptrdiff_t g = rows ? rows[i] : first + i, v = g * k;
        double a = 0.0, b = 0.0, l = -INFINITY, h = INFINITY;
        for (ptrdiff_t j = v; j < v + k; j++) {
            a += alpha[j];
            b += beta[j];
            double from = lo[j] - below[j], to = hi[j] - below[j];
            l = from > l ? from : l;
            h = to < h ? to : h;
        }
        sum_alpha[g] = a;
        sum_beta[g] = b;
        low[g] = l;
        high[g] = h;
    }
}

/* For the children v of the grandparents listed as in nnls_group: G_v =
 * Φ_g + below_v, written to g_out, and the children whose G is off their
 * segment's range [lo_v, hi_v) listed in `off` (in order). Returns how
 * many are off.
 *
 * With `corr` (the last check), where the child is on its segment, g_out
 * gets its cells' shift τ_v = (p_v·S_v + G_v)/p instead of G_v (the
 * estimate's, once none is off): S_v = α_v + β_v·corr_g its total on its
 * segment, p_v = own[v] (or own_all). */
ptrdiff_t nnls_prices(ptrdiff_t k, ptrdiff_t count, const ptrdiff_t *rows, ptrdiff_t first,
                      const double *phi, const double *below, const double *lo,
                      const double *hi, double *g_out, ptrdiff_t *off, const double *corr,
                      const double *alpha, const double *beta, double own_all,
                      const double *own, double p) {
    ptrdiff_t n = 0;
    for (ptrdiff_t i = 0; i < count; i++) {
        ptrdiff_t g = rows ? rows[i] : first + i, v = g * k;
        double shared = phi[g], c = corr ? corr[g] : 0.0;
        for (ptrdiff_t j = v; j < v + k; j++) {
            double price = shared + below[j];
            int away = (price < lo[j]) | (price >= hi[j]);
            off[n] = j; /* kept only when off: no branch to mispredict */
            n += away;
            if (corr) {
                double total = alpha[j] + beta[j] * c;
                double tau = (total * (own ? own[j] : own_all) + price) / p;
                g_out[j] = away ? price : tau;
            } else {
                g_out[j] = price;
            }
        }
    }
    return n;
}

/* out_g = the sum of grandparent g's k children's values, g < Q. */
void nnls_sums(ptrdiff_t k, ptrdiff_t Q, const double *values, double *out) {
    for (ptrdiff_t g = 0; g < Q; g++) {
        double total = 0.0;
        for (ptrdiff_t j = g * k; j < g * k + k; j++) total += values[j];
        out[g] = total;
    }
}

/* max over the parents v (of grandparents g = v / k < Q) of
 * |shift_g + p_v·(truth_v − S_v)|, S_v = α_v + β_v·corr_g the total the
 * estimate was built on (as nnls_prices computes it), p_v = own[v] (or
 * own_all): how far the prices true totals give are from those. */
double nnls_certify(ptrdiff_t k, ptrdiff_t Q, const double *shift, const double *corr,
                    const double *alpha, const double *beta, const double *truth,
                    double own_all, const double *own) {
    double largest = 0.0;
    int undefined = 0;
    for (ptrdiff_t g = 0; g < Q; g++) {
        for (ptrdiff_t j = g * k; j < g * k + k; j++) {
            double fit = alpha[j] + beta[j] * corr[g];
            double moved = fabs(shift[g] + (own ? own[j] : own_all) * (truth[j] - fit));
            largest = moved > largest ? moved : largest;
            undefined |= moved != moved; /* a NaN must not pass as a small bound */
        }
    }
    return undefined ? NAN : largest;
}
