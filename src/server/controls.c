/* controls.c — ring / KV slicing controls of one generation request from
 * its headers and body (controls.h).  It reads values and reports the
 * header or field at fault; it must never look at a connection or apply a
 * control (the engine does, per job). */
#include "controls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int ctl_onoff(const char *v, int *on) {
    if (!strcasecmp(v, "on") || !strcasecmp(v, "true") || !strcmp(v, "1")) *on = 1;
    else if (!strcasecmp(v, "off") || !strcasecmp(v, "false") || !strcmp(v, "0")) *on = 0;
    else return -1;
    return 0;
}

static int ctl_int(const char *v, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* "256" (tokens) or "0.25" (fraction of the context, 0 < f <= 1). */
static int ctl_budget(const char *v, zl_job_ctl *c) {
    if (strchr(v, '.') || strchr(v, 'e') || strchr(v, 'E')) {
        char *end = NULL;
        double f = strtod(v, &end);
        if (end == v || *end || !(f > 0 && f <= 1)) return -1;
        c->kv_frac = (float)f;
        c->kv_budget = 0;
        return 0;
    }
    long x;
    if (ctl_int(v, 1, 1L << 30, &x)) return -1;
    c->kv_budget = (int)x;
    c->kv_frac = 0;
    return 0;
}

int zl_ctl_parse(const zl_job_ctl *defaults, int n_ctx, zl_hdr_fn hdr, void *hdr_ud, json_t *b, zl_req_ctl *rc,
                 zl_verr *e) {
    memset(rc, 0, sizeof *rc);
    zl_job_ctl c = *defaults;
    const char *budget_src = "--kv-budget", *window_src = NULL;
    json_t *z = b ? json_object_get(b, "zerolayer") : NULL;
    if (z && json_is_null(z)) z = NULL;
    if (z && !json_is_object(z)) return zl_verr_set(e, "zerolayer", "zerolayer: expected an object");
    if (z) {
        const char *k;
        json_t *v;
        json_object_foreach(z, k, v) {
            if (strcmp(k, "validation") && strcmp(k, "ring") && strcmp(k, "kv_policy") && strcmp(k, "kv_budget") &&
                strcmp(k, "kv_window") && strcmp(k, "anchors") && strcmp(k, "compute"))
                return zl_verr_set(e, "zerolayer",
                                   "zerolayer.%.64s: unknown field (expected validation, ring, kv_policy, kv_budget, "
                                   "kv_window, anchors, compute)", k);
        }
    }
#define HDR(name) hdr(hdr_ud, name)
    /* 1. a compute preset replaces the server defaults (the header wins) */
    const char *comp = HDR("X-Zerolayer-Compute"), *comp_src = "X-Zerolayer-Compute";
    if (!comp && z) {
        comp_src = "zerolayer.compute";
        if (zl_jv_str(z, "compute", "zerolayer", 0, &comp, e) < 0) return -1;
    }
    if (comp) {
        if (zl_job_ctl_preset(comp, &c))
            return zl_verr_set(e, comp_src, "%s: expected exact, balanced or aggressive, got '%.64s'", comp_src, comp);
        budget_src = comp_src;
    }
    /* 2. body fields */
    if (z) {
        json_t *v = json_object_get(z, "validation");
        if (v && !json_is_null(v)) {
            int on = 0;
            if (json_is_boolean(v)) on = json_is_true(v);
            else if (!json_is_string(v) || ctl_onoff(json_string_value(v), &on))
                return zl_verr_set(e, "zerolayer.validation", "zerolayer.validation: expected \"on\" or \"off\"");
            c.spec = on ? ZL_SPEC_LOOKUP : ZL_SPEC_OFF;
        }
        long long x;
        int h = zl_jv_int(z, "ring", "zerolayer", 0, 1, 16, &x, e);
        if (h < 0) return -1;
        if (h) c.ring = (int)x;
        const char *pol = NULL;
        if (zl_jv_str(z, "kv_policy", "zerolayer", 0, &pol, e) < 0) return -1;
        if (pol && zl_kv_policy_from_name(pol, &c.kv_policy))
            return zl_verr_set(e, "zerolayer.kv_policy", "zerolayer.kv_policy: expected %s, got '%.64s'",
                               zl_kv_policy_names(), pol);
        v = json_object_get(z, "kv_budget");
        if (v && !json_is_null(v)) {
            char tmp[64];
            int bad = 0;
            if (json_is_integer(v)) {
                json_int_t t = json_integer_value(v);
                if (t < 1 || t > (1 << 30)) bad = 1;
                else c.kv_budget = (int)t, c.kv_frac = 0;
            } else if (json_is_real(v)) {
                double f = json_real_value(v);
                if (!(f > 0 && f <= 1)) bad = 1;
                else c.kv_frac = (float)f, c.kv_budget = 0;
            } else if (json_is_string(v)) {
                snprintf(tmp, sizeof tmp, "%s", json_string_value(v));
                bad = ctl_budget(tmp, &c) != 0;
            } else {
                bad = 1;
            }
            if (bad)
                return zl_verr_set(e, "zerolayer.kv_budget",
                                   "zerolayer.kv_budget: expected a token count >= 1 or a fraction of the context in (0, 1]");
            budget_src = "zerolayer.kv_budget";
        }
        h = zl_jv_int(z, "kv_window", "zerolayer", 0, 1, 1 << 30, &x, e);
        if (h < 0) return -1;
        if (h) c.kv_window = (int)x, window_src = "zerolayer.kv_window";
        v = json_object_get(z, "anchors");
        if (v && !json_is_null(v)) {
            if (!json_is_array(v) || json_array_size(v) > 64)
                return zl_verr_set(e, "zerolayer.anchors", "zerolayer.anchors: expected an array of at most 64 strings");
            size_t i;
            json_t *a;
            json_array_foreach(v, i, a) {
                if (!json_is_string(a) || !json_string_length(a))
                    return zl_verr_set(e, "zerolayer.anchors", "zerolayer.anchors[%zu]: expected a non-empty string", i);
            }
            rc->anchors = json_array_size(v) ? v : NULL;
        }
    }
    /* 3. headers override the body and the preset */
    const char *h;
    if ((h = HDR("X-Zerolayer-Validation"))) {
        int on = 0;
        if (ctl_onoff(h, &on))
            return zl_verr_set(e, "X-Zerolayer-Validation", "X-Zerolayer-Validation: expected on or off, got '%.64s'", h);
        c.spec = on ? ZL_SPEC_LOOKUP : ZL_SPEC_OFF;
    }
    if ((h = HDR("X-Zerolayer-Ring"))) {
        long x;
        if (ctl_int(h, 1, 16, &x))
            return zl_verr_set(e, "X-Zerolayer-Ring", "X-Zerolayer-Ring: expected an integer 1..16, got '%.64s'", h);
        c.ring = (int)x;
    }
    if ((h = HDR("X-Zerolayer-KV-Policy")) && zl_kv_policy_from_name(h, &c.kv_policy))
        return zl_verr_set(e, "X-Zerolayer-KV-Policy", "X-Zerolayer-KV-Policy: expected %s, got '%.64s'",
                           zl_kv_policy_names(), h);
    if ((h = HDR("X-Zerolayer-KV-Budget"))) {
        if (ctl_budget(h, &c))
            return zl_verr_set(e, "X-Zerolayer-KV-Budget",
                               "X-Zerolayer-KV-Budget: expected a token count >= 1 or a fraction in (0, 1], got '%.64s'",
                               h);
        budget_src = "X-Zerolayer-KV-Budget";
    }
    if ((h = HDR("X-Zerolayer-KV-Window"))) {
        long x;
        if (ctl_int(h, 1, 1L << 30, &x))
            return zl_verr_set(e, "X-Zerolayer-KV-Window",
                               "X-Zerolayer-KV-Window: expected a token count >= 1, got '%.64s'", h);
        c.kv_window = (int)x;
        window_src = "X-Zerolayer-KV-Window";
    }
    if ((h = HDR("X-Zerolayer-Stream-Buffer"))) {
        long x;
        if (ctl_int(h, 0, 1 << 20, &x))
            return zl_verr_set(e, "X-Zerolayer-Stream-Buffer",
                               "X-Zerolayer-Stream-Buffer: expected a token count >= 0, got '%.64s'", h);
        rc->stream_buffer = (int)x;
    }
#undef HDR
    /* a recent window with the rest of the budget for heavy hitters is the anchor policy's alone */
    if (window_src && c.kv_policy != ZL_KV_POLICY_ANCHOR)
        return zl_verr_set(e, window_src, "%s: a recent window before heavy hitters needs the anchor KV policy, not %s",
                           window_src, zl_kv_policy_name(c.kv_policy));
    if (c.kv_policy != ZL_KV_POLICY_FULL) {
        int bud = zl_job_ctl_budget(&c, n_ctx);
        if (bud < ZL_KV_BUDGET_MIN)
            return zl_verr_set(e, budget_src,
                               "%s: a KV budget of %d tokens (of the %d-token context) is below the %d tokens the %s policy needs",
                               budget_src, bud, n_ctx, ZL_KV_BUDGET_MIN,
                               zl_kv_policy_name(c.kv_policy));
        rc->bounded = 1;
    }
    rc->ctl = c;
    return 0;
}
