/* codec_fit.c — fitting a state codec to the rows a sequence caches: per
 * table the mean and principal directions (eigenvectors of the covariance,
 * cyclic Jacobi in double precision), the coefficients' variances, and per
 * bit count the quantiser step minimising the squared error on (a sample of)
 * the coefficients, with that error.  Reads the cache only through
 * zl_seq_kv_read; never runs the model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"
#include "codec.h"

#define FIT_SAMPLES 512 /* coefficients per component the step search sees */

/* Eigen-decomposition of the symmetric n x n matrix a (destroyed): vectors in
 * the rows of v, values in w. */
static void jacobi(double *a, int n, double *v, double *w) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) v[(size_t)i * n + j] = i == j;
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0, diag = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double x = a[(size_t)i * n + j];
                if (i == j) diag += x * x; else off += x * x;
            }
        if (off <= 1e-22 * diag || off == 0) break;
        for (int p = 0; p < n - 1; p++)
            for (int q = p + 1; q < n; q++) {
                double apq = a[(size_t)p * n + q];
                if (fabs(apq) < 1e-300) continue;
                double app = a[(size_t)p * n + p], aqq = a[(size_t)q * n + q];
                double theta = (aqq - app) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
                double cs = 1 / sqrt(t * t + 1), sn = t * cs;
                for (int k = 0; k < n; k++) { /* columns p, q */
                    double akp = a[(size_t)k * n + p], akq = a[(size_t)k * n + q];
                    a[(size_t)k * n + p] = cs * akp - sn * akq;
                    a[(size_t)k * n + q] = sn * akp + cs * akq;
                }
                for (int k = 0; k < n; k++) { /* rows p, q */
                    double apk = a[(size_t)p * n + k], aqk = a[(size_t)q * n + k];
                    a[(size_t)p * n + k] = cs * apk - sn * aqk;
                    a[(size_t)q * n + k] = sn * apk + cs * aqk;
                }
                for (int k = 0; k < n; k++) { /* eigenvectors as rows */
                    double vpk = v[(size_t)p * n + k], vqk = v[(size_t)q * n + k];
                    v[(size_t)p * n + k] = cs * vpk - sn * vqk;
                    v[(size_t)q * n + k] = sn * vpk + cs * vqk;
                }
            }
    }
    for (int i = 0; i < n; i++) w[i] = a[(size_t)i * n + i];
}

/* Step of the MSE-optimal uniform quantiser of a unit Gaussian with 2^b
 * levels (Max 1960): the search starts from it. */
static double gauss_step(int b) {
    static const double s[] = {1.596, 0.9957, 0.5860, 0.3352, 0.1881, 0.1041, 0.0569, 0.0308};
    return b <= 8 ? s[b - 1] : s[7] / (double)(1 << (b - 8));
}

static double quant_mse(const float *y, int n, double step, int b) {
    double levels = (double)(1L << b), half = levels / 2, e = 0;
    for (int i = 0; i < n; i++) {
        double q = floor(y[i] / step) + half;
        if (q < 0) q = 0;
        if (q > levels - 1) q = levels - 1;
        double r = (q - half + 0.5) * step - y[i];
        e += r * r;
    }
    return e / n;
}

/* Steps and errors of component k from its sampled coefficients y[0..n);
 * max_abs: the largest |coefficient| over every fitted row.  From
 * WIDE_BITS bits on, the range always covers max_abs: a sample-optimal step
 * would clip the rare large coefficients the sample misses, and those are
 * the ones attention is most sensitive to. */
#define WIDE_BITS 6
static void fit_steps(zl_codec_table *t, int k, const float *y, int n, double var, double max_abs) {
    float *step = t->step + (size_t)k * ZL_CODEC_MAX_BITS, *mse = t->mse + (size_t)k * (ZL_CODEC_MAX_BITS + 1);
    mse[0] = (float)var;
    double sigma = sqrt(var);
    for (int b = 1; b <= ZL_CODEC_MAX_BITS; b++) {
        if (!(sigma > 1e-12)) { step[b - 1] = 1e-6f; mse[b] = 0; continue; }
        double g = gauss_step(b) * sigma, best = g, best_e = quant_mse(y, n, g, b);
        double lo = log(0.35), span = log(3.5) - lo;
        for (int j = 0; j <= 10; j++) {
            double s = g * exp(lo + span * j / 10);
            double e = quant_mse(y, n, s, b);
            if (e < best_e) best_e = e, best = s;
        }
        double r = exp(span / 20);
        for (int j = -2; j <= 2; j++) {
            double s = best * pow(r, j / 2.0);
            double e = quant_mse(y, n, s, b);
            if (e < best_e) best_e = e, best = s;
        }
        double wide = max_abs * 1.05 / (double)(1L << (b - 1));
        if (b >= WIDE_BITS && best < wide) best = wide, best_e = quant_mse(y, n, best, b);
        step[b - 1] = (float)best;
        mse[b] = (float)(best_e < var ? best_e : var);
    }
}

static int fit_table(zl_codec *c, zl_codec_table *t, const float *rows, int n, int d, int h, zl_err *err) {
    int hd = c->head_dim;
    double *mean = calloc((size_t)hd, sizeof *mean), *cov = calloc((size_t)hd * hd, sizeof *cov);
    double *v = malloc((size_t)hd * hd * sizeof *v), *w = malloc((size_t)hd * sizeof *w);
    int *order = malloc((size_t)hd * sizeof *order);
    int ns = n < FIT_SAMPLES ? n : FIT_SAMPLES, stride = n / ns;
    float *ys = malloc((size_t)ns * sizeof *ys);
    int rc = 0;
    if (!mean || !cov || !v || !w || !order || !ys) { rc = zl_errf(err, ZL_ENOMEM, "out of memory"); goto done; }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < hd; j++) mean[j] += rows[(size_t)i * d + (size_t)h * hd + j];
    for (int j = 0; j < hd; j++) mean[j] /= n;
    for (int i = 0; i < n; i++) {
        const float *r = rows + (size_t)i * d + (size_t)h * hd;
        for (int a = 0; a < hd; a++) {
            double xa = r[a] - mean[a];
            for (int b = a; b < hd; b++) cov[(size_t)a * hd + b] += xa * (r[b] - mean[b]);
        }
    }
    for (int a = 0; a < hd; a++)
        for (int b = a; b < hd; b++) cov[(size_t)b * hd + a] = cov[(size_t)a * hd + b] /= n;
    jacobi(cov, hd, v, w);
    for (int i = 0; i < hd; i++) order[i] = i;
    for (int i = 1; i < hd; i++) /* by decreasing variance */
        for (int j = i; j > 0 && w[order[j]] > w[order[j - 1]]; j--) { int tmp = order[j]; order[j] = order[j - 1]; order[j - 1] = tmp; }
    for (int j = 0; j < hd; j++) t->mean[j] = (float)mean[j];
    for (int k = 0; k < hd; k++)
        for (int j = 0; j < hd; j++) t->basis[(size_t)k * hd + j] = (float)v[(size_t)order[k] * hd + j];
    for (int k = 0; k < hd; k++) {
        const float *e = t->basis + (size_t)k * hd;
        double var = 0, max_abs = 0;
        for (int i = 0; i < n; i++) {
            const float *r = rows + (size_t)i * d + (size_t)h * hd;
            double y = 0;
            for (int j = 0; j < hd; j++) y += (double)e[j] * (r[j] - t->mean[j]);
            var += y * y;
            if (fabs(y) > max_abs) max_abs = fabs(y);
            if (i % stride == 0 && i / stride < ns) ys[i / stride] = (float)y; /* an evenly spread sample */
        }
        t->var[k] = (float)(var / n);
        fit_steps(t, k, ys, ns, t->var[k], max_abs);
    }
done:
    free(mean); free(cov); free(v); free(w); free(order); free(ys);
    return rc;
}

int zl_codec_fit(zl_codec **out, const zl_seq *s, const uint8_t fingerprint[32], double ratio, zl_err *err) {
    *out = NULL;
    int n = zl_seq_n_cached(s) - ZL_CODEC_SINKS;
    if (n < 16) return zl_errf(err, ZL_EINVAL, "fitting a codec needs at least 16 cached tokens, have %d", n);
    if (zl_seq_n_past(s) != n + ZL_CODEC_SINKS) return zl_errf(err, ZL_EUNSUP, "fitting a codec needs the full KV policy");
    zl_codec *c;
    int rc;
    zl_kv_shape sh = zl_seq_kv_shape(s);
    if ((rc = zl_codec_new(&c, sh.n_layers, sh.n_kv_heads, sh.head_dim, err))) return rc;
    memcpy(c->fingerprint, fingerprint, 32);
    c->n_sink = ZL_CODEC_SINKS;
    int d = sh.n_kv_heads * sh.head_dim;
    float *rows = malloc((size_t)n * d * sizeof *rows);
    if (!rows) { zl_codec_free(c); return zl_errf(err, ZL_ENOMEM, "out of memory"); }
    for (int l = 0; l < sh.n_layers && !rc; l++)
        for (int part = 0; part < 2 && !rc; part++) {
            if ((rc = zl_seq_kv_read(s, l, part ? ZL_STATE_V : ZL_STATE_K_PRE_ROPE, ZL_CODEC_SINKS, n, rows, err))) break;
            for (int h = 0; h < sh.n_kv_heads && !rc; h++) rc = fit_table(c, zl_codec_tab(c, l, h, part), rows, n, d, h, err);
        }
    free(rows);
    if (!rc) rc = zl_codec_set_ratio(c, ratio, err);
    if (rc) { zl_codec_free(c); return rc; }
    *out = c;
    return 0;
}
