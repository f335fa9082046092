/* The sync driver's reader in C: a sync body's steady reads without a Python frame per read. The
 * transport's, not the core's: it reads the clock (CLOCK_MONOTONIC, for time.monotonic) and drives
 * the body's iterator (the connection's reads). Every decision stays in the core: each read is
 * stepped through the steady lane (otel_liveness/core/wire/_lane.c), called from C through the lane's
 * capsule (otel_liveness/core/wire/lane_api.h), and every read the lane does not admit goes to the body,
 * which asks the engine. Built only beside the C lane; without it the body runs its own loop
 * (otel_liveness/transport/_backends.py). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <time.h>

#include "../core/wire/lane_api.h"

/* The C lane's API (_lane.c's capsule), looked up when this module is imported: no lane, no
 * reader (the import fails, and the body runs its own loop). */
static const LaneAPI *lane_api = NULL;
/* time.monotonic, the builtin: a Reader given it reads the clock in C (monotonic_now) */
static PyObject *time_monotonic = NULL;

/* Reader(lane, iterator, clock, body, steady): a sync body's steady reads without a Python frame
 * per read. ``body`` is the driver's generator, which judges everything else; while it has
 * yielded ``steady`` the reader reads ``iterator`` itself: each read is timed by ``clock()`` and
 * stepped through ``lane`` (Lane.step), and an admitted read is returned as it is -- the loop the
 * driver would run in Python. The first read the lane does not admit is sent into ``body`` as
 * ``(now, chunk)``, the end of ``iterator`` as ``None``, and an exception of ``iterator``,
 * ``clock`` or the lane is thrown into it there; what ``body`` yields next is returned (``steady``
 * again: back to reading). Holds no reference cycle: ``body`` does not know the reader, so a
 * reader dropped unfinished closes ``body`` at once, as a dropped generator would be. */
typedef struct {
    PyObject_HEAD
    PyObject *lane; /* a C lane (lane_api->lane_type) */
    PyObject *it;
    PyObject *clock;
    PyObject *body;
    PyObject *steady;
    int monotonic; /* clock is time.monotonic: read CLOCK_MONOTONIC here, as it would (Linux) */
    int reading; /* body yielded steady: the reader reads */
    int running; /* a next() is in progress (another thread's, while this one waits for a read) */
} Reader;

static int
Reader_traverse(Reader *self, visitproc visit, void *arg)
{
    Py_VISIT(self->lane);
    Py_VISIT(self->it);
    Py_VISIT(self->clock);
    Py_VISIT(self->body);
    Py_VISIT(self->steady);
    return 0;
}

static int
Reader_clear(Reader *self)
{
    Py_CLEAR(self->lane);
    Py_CLEAR(self->it);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->body);
    Py_CLEAR(self->steady);
    return 0;
}

static void
Reader_dealloc(Reader *self)
{
    PyObject_GC_UnTrack(self);
    Reader_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
Reader_init(Reader *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"lane", "iterator", "clock", "body", "steady", NULL};
    PyObject *lane, *it, *clock, *body, *steady;
    if (self->running) {
        PyErr_SetString(PyExc_RuntimeError, "Reader is running: it cannot be re-initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOOO", kwlist, lane_api->lane_type, &lane, &it, &clock, &body,
                                     &steady))
        return -1;
    if (!PyIter_Check(it) || !PyIter_Check(body)) {
        PyErr_SetString(PyExc_TypeError, "iterator and body must be iterators");
        return -1;
    }
    if (!PyCallable_Check(clock)) {
        PyErr_SetString(PyExc_TypeError, "clock must be callable");
        return -1;
    }
    Py_INCREF(lane);
    Py_XSETREF(self->lane, lane);
    Py_INCREF(it);
    Py_XSETREF(self->it, it);
    Py_INCREF(clock);
    Py_XSETREF(self->clock, clock);
    Py_INCREF(body);
    Py_XSETREF(self->body, body);
    Py_INCREF(steady);
    Py_XSETREF(self->steady, steady);
    self->monotonic = time_monotonic != NULL && clock == time_monotonic;
    self->reading = 0;
    self->running = 0;
    return 0;
}

/* Resume body with value (NULL: next()): what it yields (new reference), or NULL -- with an
 * exception set, or none when it returned (the end of the iteration). */
static PyObject *
resume(Reader *self, PyObject *value)
{
    PyObject *result = NULL;
    PySendResult r = PyIter_Send(self->body, value == NULL ? Py_None : value, &result);
    if (r == PYGEN_NEXT)
        return result;
    if (r == PYGEN_RETURN)
        Py_XDECREF(result);
    return NULL;
}

/* The pending exception thrown into body: what it yields then, or NULL (see resume()). */
static PyObject *
throw_in(Reader *self)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    if (value == NULL)
        return NULL;
    PyObject *result = PyObject_CallMethod(self->body, "throw", "O", value);
    Py_DECREF(value);
    if (result == NULL && PyErr_ExceptionMatches(PyExc_StopIteration))
        PyErr_Clear(); /* body returned */
    return result;
}

static PyObject *reader_next(Reader *self);

/* time.monotonic() without the call and the float: on Linux CPython reads CLOCK_MONOTONIC and
 * converts its nanoseconds to seconds exactly so (_PyTime_AsSecondsDouble), so the engine sees the
 * same values from both. 0, or -1 (no error set) to call the clock instead. */
static int
monotonic_now(double *now)
{
#if defined(__linux__) && defined(CLOCK_MONOTONIC)
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return -1;
    int64_t ns = (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
    volatile double d; /* as CPython: no rounding other than the one division */
    if (ns % 1000000000 == 0) {
        d = (double)(ns / 1000000000);
    }
    else {
        d = (double)ns;
        d /= 1e9;
    }
    *now = d;
    return 0;
#else
    (void)now;
    return -1;
#endif
}

/* As a generator: a next() while another is in progress (a second thread iterating the same body)
 * raises ValueError and changes nothing. */
static PyObject *
Reader_next(Reader *self)
{
    if (self->body == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Reader.__init__() was not called");
        return NULL;
    }
    if (self->running) {
        PyErr_SetString(PyExc_ValueError, "Reader already executing");
        return NULL;
    }
    self->running = 1;
    Py_INCREF(self); /* kept while it runs, whatever the body does with its references */
    PyObject *out = reader_next(self);
    self->running = 0;
    Py_DECREF(self);
    return out;
}

static PyObject *
reader_next(Reader *self)
{
    PyObject *out;
    if (!self->reading)
        out = resume(self, NULL);
    else
        goto read;
    for (;;) {
        if (out != self->steady)
            return out; /* bytes body releases, or NULL: the end or an error */
        Py_DECREF(out);
        self->reading = 1;
    read:;
        PyObject *chunk = PyIter_Next(self->it);
        if (chunk == NULL) {
            self->reading = 0;
            out = PyErr_Occurred() ? throw_in(self) : resume(self, Py_None);
            continue;
        }
        double now = -1.0;
        if (!self->monotonic || monotonic_now(&now) < 0) {
            PyObject *t = PyObject_CallNoArgs(self->clock);
            if (t != NULL) {
                now = PyFloat_AsDouble(t);
                Py_DECREF(t);
            }
        }
        /* Lane.step(chunk, now) without the call: the lane checked, then stepped (lane_api.h) */
        int rc = (now == -1.0 && PyErr_Occurred()) ? -1 : lane_api->step(self->lane, chunk, now);
        if (rc == 1)
            return chunk;
        self->reading = 0;
        if (rc < 0) {
            Py_DECREF(chunk);
            out = throw_in(self);
            continue;
        }
        PyObject *taken = Py_BuildValue("(dN)", now, chunk); /* steals chunk */
        if (taken == NULL) {
            out = throw_in(self);
            continue;
        }
        out = resume(self, taken);
        Py_DECREF(taken);
    }
}

static PyObject *
Reader_close(Reader *self, PyObject *Py_UNUSED(ignored))
{
    if (self->running) {
        PyErr_SetString(PyExc_ValueError, "Reader already executing");
        return NULL;
    }
    self->reading = 0;
    if (self->body == NULL)
        Py_RETURN_NONE;
    return PyObject_CallMethod(self->body, "close", NULL);
}

static PyMethodDef Reader_methods[] = {
    {"close", (PyCFunction)Reader_close, METH_NOARGS, "close body (as a generator's close())"},
    {NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "otel_liveness.transport._reader.Reader",
    .tp_doc = "Reader(lane, iterator, clock, body, steady): a sync body's steady reads in C (see _reader.pyi).",
    .tp_basicsize = sizeof(Reader),
    .tp_itemsize = 0,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_traverse = (traverseproc)Reader_traverse,
    .tp_clear = (inquiry)Reader_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)Reader_next,
    .tp_methods = Reader_methods,
};

static struct PyModuleDef readermodule = {
    PyModuleDef_HEAD_INIT,
    .m_name = "otel_liveness.transport._reader",
    .m_doc = "The sync driver's reader in C: a body's steady reads through the C lane (see _reader.pyi).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__reader(void)
{
    if (lane_api == NULL) {
        const LaneAPI *api = PyCapsule_Import(LANE_API_CAPSULE, 0);
        if (api == NULL || api->version != LANE_API_VERSION) {
            /* no C lane (not built), or another version of it: an ImportError, which the
               transport takes for "no reader" (the body's own loop) */
            PyObject *type, *cause, *tb;
            PyErr_Fetch(&type, &cause, &tb); /* (3.11: no PyErr_GetRaisedException) */
            PyErr_NormalizeException(&type, &cause, &tb);
            Py_XDECREF(type);
            Py_XDECREF(tb);
            PyErr_Format(PyExc_ImportError, "otel_liveness.transport._reader needs the C lane's %s (version %d)",
                         LANE_API_CAPSULE, LANE_API_VERSION);
            if (cause != NULL) {
                PyObject *exc, *trace;
                PyErr_Fetch(&type, &exc, &trace);
                PyErr_NormalizeException(&type, &exc, &trace);
                PyException_SetCause(exc, cause); /* steals cause */
                PyErr_Restore(type, exc, trace);
            }
            return NULL;
        }
        lane_api = api;
    }
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
#if defined(__linux__) && defined(CLOCK_MONOTONIC)
    if (time_monotonic == NULL) {
        PyObject *time_module = PyImport_ImportModule("time");
        if (time_module == NULL)
            return NULL;
        time_monotonic = PyObject_GetAttrString(time_module, "monotonic"); /* kept for the process */
        Py_DECREF(time_module);
        if (time_monotonic == NULL)
            return NULL;
        if (!PyCFunction_Check(time_monotonic)) {
            /* replaced before this import (a fake clock): never read CLOCK_MONOTONIC in its stead */
            Py_CLEAR(time_monotonic);
        }
    }
#endif
    PyObject *m = PyModule_Create(&readermodule);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ReaderType);
    if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(&ReaderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
