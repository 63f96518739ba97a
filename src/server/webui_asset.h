/* webui_asset.h — the chat page embedded in the binary (GET /, api_webui.c).
 * The definitions are generated at build time (cmake/webui.cmake): by
 * web/build.mjs from web/src when node and web/node_modules are there, else a
 * page that says how to get the real one (zl_webui_bundled = 0). */
#ifndef ZL_WEBUI_ASSET_H
#define ZL_WEBUI_ASSET_H

#include <stddef.h>

extern const int zl_webui_bundled;         /* 1: the chat page; 0: the "not built" message page */
extern const char zl_webui_csp[];          /* its Content-Security-Policy (script and style by SHA-256) */
extern const unsigned char zl_webui_html[]; /* the page, UTF-8 */
extern const size_t zl_webui_html_len;
extern const unsigned char zl_webui_gz[];   /* the same page gzipped (zl_webui_gz_len 0: none) */
extern const size_t zl_webui_gz_len;

#endif
