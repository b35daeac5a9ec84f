#ifndef HERALD_CRDKAFKA_SHIM_H
#define HERALD_CRDKAFKA_SHIM_H
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdint.h>

/* rd_kafka_producev() is variadic and its RD_KAFKA_V_* arguments are macros, neither of which
   Swift can call. This shim produces one message with key, value and opaque through the
   non-variadic rd_kafka_produceva(). The payload is copied (RD_KAFKA_MSG_F_COPY). */
static inline rd_kafka_error_t *herald_rdkafka_produce(rd_kafka_t *rk, const char *topic, int32_t partition,
                                                      const void *key, size_t key_len,
                                                      const void *value, size_t value_len,
                                                      rd_kafka_headers_t *headers, void *opaque) {
    rd_kafka_vu_t vus[6];
    size_t n = 0;
    vus[n].vtype = RD_KAFKA_VTYPE_TOPIC; vus[n].u.cstr = topic; n++;
    vus[n].vtype = RD_KAFKA_VTYPE_PARTITION; vus[n].u.i32 = partition; n++;
    vus[n].vtype = RD_KAFKA_VTYPE_KEY; vus[n].u.mem.ptr = (void *)key; vus[n].u.mem.size = key_len; n++;
    vus[n].vtype = RD_KAFKA_VTYPE_VALUE; vus[n].u.mem.ptr = (void *)value; vus[n].u.mem.size = value_len; n++;
    vus[n].vtype = RD_KAFKA_VTYPE_MSGFLAGS; vus[n].u.i32 = RD_KAFKA_MSG_F_COPY; n++;
    vus[n].vtype = RD_KAFKA_VTYPE_OPAQUE; vus[n].u.ptr = opaque; n++;
    if (headers != NULL) {
        /* Ownership of headers passes to librdkafka on success. */
        rd_kafka_vu_t all[7];
        for (size_t i = 0; i < n; i++) all[i] = vus[i];
        all[n].vtype = RD_KAFKA_VTYPE_HEADERS; all[n].u.headers = headers;
        return rd_kafka_produceva(rk, all, n + 1);
    }
    return rd_kafka_produceva(rk, vus, n);
}

static inline int32_t herald_rdkafka_partition_ua(void) { return RD_KAFKA_PARTITION_UA; }
static inline int64_t herald_rdkafka_offset_invalid(void) { return RD_KAFKA_OFFSET_INVALID; }

#endif
