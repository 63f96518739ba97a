/* vexp.h — exp over an array of floats, summed in double, with a proven
 * error bound: the sampler uses it for the decisions that need the whole
 * vocabulary's mass (the unfiltered draw's token, top-p's cut) without a libm
 * call per entry (decode/sampler.c), and needs a bound it can reason with,
 * not a fast guess.
 *
 * Every level computes, for each input l, x = (l - m) / t in float
 * arithmetic exactly as C computes it (two IEEE float roundings: the
 * sampler's x; m = 0, t = 1 give x = l), then, x widened exactly to double,
 *   x clamped to [-200, 0] (NaN stays NaN),
 *   k = x·log2(e) rounded to an integer, r = x - k·ln2 (ln2 as hi + lo),
 *   p = the degree-9 Taylor polynomial of e^r (Horner), e = p·2^k (exact),
 * in double arithmetic (the SIMD levels with FMA, the scalar reference
 * without; the bound covers both), and returns the sum of the e's in double,
 * in an order of its own.
 *
 * Bound on one term, x in [-200, 0] (|e - exp(x)| <= ZL_VEXP_REL_ERR·exp(x)):
 *   range reduction: x·log2(e) rounds with an error below 2^-43, so k is
 *     within 0.5 + 2^-43 of it and |r| <= 0.3466; ln2_hi has 32 significant
 *     bits and |k| <= 289, so k·ln2_hi is exact; x - k·ln2_hi (exact by
 *     Sterbenz except next to a rounding boundary of k) and the subtraction of
 *     k·ln2_lo round at most once each (< 2^-54 each), and ln2 - ln2_hi -
 *     ln2_lo < 2^-85: r is off by less than 2^-53, e^r by a relative < 2^-52;
 *   polynomial: the Lagrange remainder of Taylor degree 9 is at most
 *     |r|^10/10!·e^|r| <= 0.3466^10/3628800·1.415 < 1.0e-11 absolute, over
 *     e^r >= e^-0.3466 > 0.707: < 1.4e-11 relative;
 *   rounding: the coefficients 1/j! are each within 2^-53 relative, and
 *     Horner with or without FMA (9 steps, two roundings each) on |r| <= 0.35
 *     with positive coefficients has condition number at most
 *     e^0.35/e^-0.35 < 2.02, so < 2·(2·9 + 1)·2^-53·2.02 < 1e-14 relative;
 *   scaling: 2^k with k >= -289 keeps p·2^k a normal double, exact.
 *   Total < 1.5e-11 < 2^-33.
 * For x < -200 (and -inf) the result is exp(-200)(1 ± 2^-33) < 2^-288 while
 * exp(x) is smaller still: |e - exp(x)| < ZL_VEXP_ABS_ERR.  For x > 0 the
 * result is 1 (x is clamped; callers pass x <= 0).  exp(±0) is exactly 1.
 *
 * The sum of n terms (any order of double additions, at most n deep) is
 * within gamma_n = n·2^-53/(1 - n·2^-53) relative of the terms' exact sum;
 * callers add that themselves (the sampler does).  A NaN input makes the sum
 * NaN.
 *
 * Scalar reference in vexp_ref.c (which also dispatches); AVX2, AVX-512 and
 * NEON in their own files. */
#ifndef ZL_VEXP_H
#define ZL_VEXP_H

#define ZL_VEXP_REL_ERR 0x1p-33
#define ZL_VEXP_ABS_ERR 0x1p-288

/* Returns sum_{i<n} e_i with e_i ≈ exp((l[i] - m) / t) as above; when e is
 * not NULL, also stores e[i] = e_i. */
typedef double (*zl_vexp_sum_fn)(const float *l, float m, float t, int n, double *e);

/* The best level <= isa (a zl_isa) that this CPU can run (never NULL). */
zl_vexp_sum_fn zl_vexp_sum_fn_for(int isa);

/* Per level; NULL where the build has none. */
double zl_vexp_sum_ref(const float *l, float m, float t, int n, double *e);
zl_vexp_sum_fn zl_vexp_sum_fn_avx2(void);
zl_vexp_sum_fn zl_vexp_sum_fn_avx512(void);
zl_vexp_sum_fn zl_vexp_sum_fn_neon(void); /* AArch64 only */

#endif
