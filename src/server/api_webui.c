/* api_webui.c — GET /: the chat page embedded in the binary (webui_asset.h,
 * generated from web/ at build time).  It sends the page, gzipped when the
 * browser accepts gzip, under a Content-Security-Policy that lets only the
 * page's own script and style run (by their SHA-256): nothing a model writes
 * into the page can execute even if it got past the sanitiser.  The page
 * talks to the public API only; this file never reads a body or a session.
 * Whether the route exists at all (--no-webui) is decided in routes.c. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "webui_asset.h"

/* "gzip" among Accept-Encoding's codings, unless its weight is q=0 */
static int accepts_gzip(const char *ae) {
    for (const char *p = ae; p && *p;) {
        p += strspn(p, " \t,");
        size_t l = strcspn(p, ",; \t");
        int gz = l == 4 && !strncasecmp(p, "gzip", 4);
        p += l;
        double q = 1;
        const char *w = strstr(p, "q=");
        size_t rest = strcspn(p, ",");
        if (w && (size_t)(w - p) < rest) q = strtod(w + 2, NULL);
        p += rest;
        if (gz) return q > 0;
    }
    return 0;
}

enum MHD_Result zl_api_webui(zl_req *r, json_t *body) {
    (void)body;
    int gz = zl_webui_gz_len > 0 && accepts_gzip(zl_req_header(r->conn, "Accept-Encoding"));
    const char *hdrs[] = {"Content-Security-Policy", zl_webui_csp,
                          "X-Content-Type-Options", "nosniff",
                          "Referrer-Policy", "no-referrer",
                          "Cache-Control", "no-cache",
                          "Vary", "Accept-Encoding",
                          gz ? "Content-Encoding" : NULL, "gzip",
                          NULL};
    return zl_reply_bytes(r, 200, "text/html; charset=utf-8", gz ? zl_webui_gz : zl_webui_html,
                          gz ? zl_webui_gz_len : zl_webui_html_len, hdrs, 1);
}
