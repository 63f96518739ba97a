/* batches.c — Anthropic Message Batches (placeholder). */
#include "http.h"

enum MHD_Result zl_api_batches_create(zl_req *r, json_t *body) {
    (void)body;
    return zl_reply_error(r, ZL_E_NOT_FOUND, NULL, "message batches are not available yet");
}
enum MHD_Result zl_api_batches_list(zl_req *r) { return zl_api_batches_create(r, NULL); }
enum MHD_Result zl_api_batches_get(zl_req *r, const char *id) { (void)id; return zl_api_batches_create(r, NULL); }
enum MHD_Result zl_api_batches_results(zl_req *r, const char *id) { (void)id; return zl_api_batches_create(r, NULL); }
enum MHD_Result zl_api_batches_cancel(zl_req *r, const char *id) { (void)id; return zl_api_batches_create(r, NULL); }
void zl_batches_free(struct zl_batches *b) { (void)b; }
