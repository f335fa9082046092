/* The bulk scanner's C entry points for the other extension (_lane.c), shared through the capsule
 * otel_liveness.core.wire._bulk._C_API. A lane attached to an exact _bulk.Scanner calls admit() through
 * it with no Python call and no boxed result; any other scanner (PyScanner, a subclass) is called
 * through its bound admit(). The version guards a lane built against another header. */
#ifndef OTEL_LIVENESS_BULK_API_H
#define OTEL_LIVENESS_BULK_API_H

#include <Python.h>

#define BULK_API_CAPSULE "otel_liveness.core.wire._bulk._C_API"
#define BULK_API_VERSION 2

typedef struct {
    int version;
    PyTypeObject *scanner_type;
    /* Scanner.admit(chunk) unboxed: the frames, -1 declined (nothing changed), -2 an error set */
    Py_ssize_t (*admit)(PyObject *scanner, PyObject *chunk);
    /* the heartbeat frames of the last admitted read, and how many of them follow its last
       semantic frame (Scanner.beats, Scanner.trailing) */
    void (*beats)(PyObject *scanner, Py_ssize_t *beats, Py_ssize_t *trailing);
} BulkAPI;

#endif
