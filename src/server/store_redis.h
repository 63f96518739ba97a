/* store_redis.h — the Redis state store (store_redis.c). */
#ifndef ZL_STORE_REDIS_H
#define ZL_STORE_REDIS_H

#include <stddef.h>

#include "../runtime/store.h"

#define ZL_REDIS_TIMEOUT_MS 250

/* redis://HOST[:PORT][/DB] (port 6379, db 0 by default); 0 or ZL_EINVAL. */
int zl_redis_url_parse(const char *url, char *host, size_t cap, int *port, int *db, zl_err *err);
/* Nothing is contacted here: the first call connects (an unreachable Redis
 * is an outage, not a failed start).  ZL_EUNSUP in a build without hiredis. */
int zl_store_redis_open(zl_store **out, const char *url, zl_err *err);
int zl_store_redis_available(void);

#endif
