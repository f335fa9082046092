/* The steady lane's C entry points for the transport's sync reader
 * (otel_liveness/transport/_reader.c), shared through the capsule otel_liveness.core.wire._lane._C_API,
 * the way _bulk.c shares its scanner with _lane.c (bulk_api.h). The reader steps the lane on each
 * read with no Python call and no boxed result; the lane stays pure (the reader passes the time of
 * each read). The version guards a reader built against another header. */
#ifndef OTEL_LIVENESS_LANE_API_H
#define OTEL_LIVENESS_LANE_API_H

#include <Python.h>

#define LANE_API_CAPSULE "otel_liveness.core.wire._lane._C_API"
#define LANE_API_VERSION 1

typedef struct {
    int version;
    PyTypeObject *lane_type;
    /* Lane.step(chunk, now) unboxed, on a Lane (lane_type): 1 admitted (counted, kept), 0 not
     * (nothing changed), -1 an error set -- a lane whose __init__ never ran, or one busy in step()
     * (called back from its scanner's admit()), is refused as step() refuses it. */
    int (*step)(PyObject *lane, PyObject *chunk, double now);
} LaneAPI;

#endif
