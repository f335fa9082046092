/* The steady lane in C: the same class as otel_liveness/core/wire/lane.py's PyLane (the reference);
 * both provide exactly lane.LaneLike, and tests/test_lane.py keeps the two equal. Pure: no clock,
 * no I/O; the caller passes the time of each read. One call per read of a live stream: the
 * attached bulk scanner's admit() (_bulk.c, called in C through its capsule, bulk_api.h) says
 * whether the read holds only content and heartbeat frames; the lane counts it and keeps the
 * prefix. Without a scanner it admits nothing: the framing is the scanner's alone. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <math.h>
#include <string.h>

#include "bulk_api.h"

/* The bulk scanner's C API (_bulk.c's capsule), looked up at the first attach; NULL when _bulk is
 * not built or is another version: every scanner is then called through its bound admit(). */
static const BulkAPI *bulk_api = NULL;
static int bulk_api_tried = 0;

typedef struct {
    PyObject_HEAD
    double horizon;
    double step;
    double wall;
    double last;
    double semantic;       /* the time of the last read that held a semantic frame */
    double max_gap;
    double max_semantic_gap;
    Py_ssize_t room;
    Py_ssize_t reads;
    Py_ssize_t frames;
    Py_ssize_t nbytes;
    Py_ssize_t heartbeats; /* heartbeat frames of the reads recorded in beats */
    Py_ssize_t since;      /* heartbeat frames after the last semantic frame read */
    PyObject *beats; /* list of (time, count): the admitted reads that held heartbeats */
    PyObject *keep; /* list */
    PyObject *scanner; /* a bulk scanner, or NULL */
    PyObject *admit;   /* its bound admit(), or NULL */
    Py_ssize_t (*admit_c)(PyObject *, PyObject *); /* admit() unboxed, for an exact _bulk.Scanner */
    int busy;          /* step() is calling admit() (Python): the lane is not to be used meanwhile */
} Lane;

/* Every method checks the lane first: an object whose __init__ never ran (Lane.__new__(Lane), a
 * subclass that skips it) has no keep list; and while step() is in the scanner's
 * admit() -- a call into Python, which may call back into the lane or let another thread in --
 * the lane is refused, not raced. */
static int
check_lane(Lane *self)
{
    if (self->keep == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Lane.__init__() was not called");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Lane is busy: step() is in progress (called back from the scanner's admit())");
        return -1;
    }
    return 0;
}

static int
Lane_traverse(Lane *self, visitproc visit, void *arg)
{
    Py_VISIT(self->keep);
    Py_VISIT(self->beats);
    Py_VISIT(self->scanner);
    Py_VISIT(self->admit);
    return 0;
}

static int
Lane_clear(Lane *self)
{
    Py_CLEAR(self->keep);
    Py_CLEAR(self->beats);
    Py_CLEAR(self->scanner);
    Py_CLEAR(self->admit);
    self->admit_c = NULL;
    return 0;
}

static void
Lane_dealloc(Lane *self)
{
    PyObject_GC_UnTrack(self);
    Lane_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
Lane_init(Lane *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"keep", NULL};
    PyObject *keep;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Lane is busy: it cannot be re-initialised during step()");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!", kwlist, &PyList_Type, &keep))
        return -1;
    PyObject *beats = PyList_New(0);
    if (beats == NULL)
        return -1;
    Py_XSETREF(self->beats, beats);
    self->heartbeats = 0;
    self->since = 0;
    Py_INCREF(keep);
    Py_XSETREF(self->keep, keep);
    self->horizon = -INFINITY;
    self->step = 0.0;
    self->wall = INFINITY;
    self->last = 0.0;
    self->semantic = 0.0;
    self->max_gap = 0.0;
    self->max_semantic_gap = 0.0;
    self->room = 0;
    self->reads = 0;
    self->frames = 0;
    self->nbytes = 0;
    Py_CLEAR(self->scanner);
    Py_CLEAR(self->admit);
    self->admit_c = NULL;
    return 0;
}

/* A scanner's count attribute (beats, trailing; 0 when it has none): 0, or -1 with an error set. */
static int
read_count(PyObject *scanner, const char *name, Py_ssize_t *out)
{
    PyObject *v = PyObject_GetAttrString(scanner, name);
    if (v == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear(); /* a scanner that admits no heartbeats need not say so */
        *out = 0;
        return 0;
    }
    *out = PyLong_AsSsize_t(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* One read: 1 admitted (counted, kept), 0 not (nothing changed), -1 error. The lane is checked.
 * A read the scanner admits may hold heartbeats (pings inside a run of deltas, or pings alone):
 * (now, count) goes into beats, for the attempt to count and announce (take_beats()). A read of
 * heartbeats alone (beats == frames) moves the raw clock only: the horizon stays. */
static int
lane_step(Lane *self, PyObject *chunk, double now)
{
    if (!(now < self->horizon) || !PyBytes_CheckExact(chunk))
        return 0;
    const char *s = PyBytes_AS_STRING(chunk);
    Py_ssize_t n = PyBytes_GET_SIZE(chunk);
    Py_ssize_t frames, beats = 0, trailing = 0;
    if (self->admit == NULL)
        return 0; /* no scanner attached: nothing is admitted */
    /* the scanner consumes the read only if it admits it; a failure below then ends the stream
       (the error propagates), so the order does not leave a half-counted read */
    if (self->admit_c != NULL) {
        /* an exact _bulk.Scanner: the same call without a Python frame or a boxed result (it
           calls no Python: a read its fast prefixes do not cover is declined) */
        PyObject *scanner = self->scanner;
        Py_INCREF(scanner);
        self->busy = 1;
        frames = self->admit_c(scanner, chunk);
        self->busy = 0;
        if (frames > 0)
            bulk_api->beats(scanner, &beats, &trailing);
        Py_DECREF(scanner);
        if (frames == -2)
            return -1;
    }
    else {
        PyObject *admit = self->admit;
        Py_INCREF(admit); /* held for the call, whatever it does to the lane */
        self->busy = 1;
        PyObject *res = PyObject_CallOneArg(admit, chunk);
        self->busy = 0;
        Py_DECREF(admit);
        if (res == NULL)
            return -1;
        frames = PyLong_AsSsize_t(res);
        Py_DECREF(res);
        if (frames == -1 && PyErr_Occurred())
            return -1;
        if (frames > 0 && (read_count(self->scanner, "beats", &beats) < 0
                           || read_count(self->scanner, "trailing", &trailing) < 0))
            return -1;
    }
    if (frames < 0)
        return 0;
    /* the heartbeats and the keep first: they are the only steps that can fail, and a failed
       step changes nothing of the lane */
    if (beats > 0) {
        PyObject *beat = Py_BuildValue("(dn)", now, beats);
        if (beat == NULL)
            return -1;
        int rc = PyList_Append(self->beats, beat);
        Py_DECREF(beat);
        if (rc < 0)
            return -1;
    }
    if (self->room >= n) {
        if (PyList_Append(self->keep, chunk) < 0)
            goto unbeat;
        self->room -= n;
    }
    else if (self->room > 0) {
        PyObject *part = PyBytes_FromStringAndSize(s, self->room);
        if (part == NULL)
            goto unbeat;
        int rc = PyList_Append(self->keep, part);
        Py_DECREF(part);
        if (rc < 0)
            goto unbeat;
        self->room = 0;
    }
    self->heartbeats += beats;
    self->reads += 1;
    self->frames += frames;
    self->nbytes += n;
    double gap = now - self->last;
    if (gap > self->max_gap)
        self->max_gap = gap;
    self->last = now;
    if (beats < frames) { /* content: the semantic clock moves, and the horizon with it */
        self->since = trailing;
        gap = now - self->semantic;
        if (gap > self->max_semantic_gap)
            self->max_semantic_gap = gap;
        self->semantic = now;
        double horizon = now + self->step;
        self->horizon = horizon < self->wall ? horizon : self->wall;
    }
    else { /* heartbeats alone */
        self->since += beats;
    }
    return 1;
unbeat:
    if (beats > 0)
        (void)PyList_SetSlice(self->beats, PyList_GET_SIZE(self->beats) - 1, PyList_GET_SIZE(self->beats), NULL);
    return -1;
}

static PyObject *
Lane_step(Lane *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "step(chunk, now) takes 2 arguments");
        return NULL;
    }
    if (check_lane(self) < 0)
        return NULL;
    double now = PyFloat_AsDouble(args[1]);
    if (now == -1.0 && PyErr_Occurred())
        return NULL;
    int rc = lane_step(self, args[0], now);
    if (rc < 0)
        return NULL;
    return PyBool_FromLong(rc);
}

static PyObject *
Lane_open(Lane *self, PyObject *args)
{
    double horizon, step, wall, last;
    Py_ssize_t room, since = 0;
    if (check_lane(self) < 0)
        return NULL;
    if (!PyArg_ParseTuple(args, "ddddn|n:open", &horizon, &step, &wall, &last, &room, &since))
        return NULL;
    self->horizon = horizon;
    self->step = step;
    self->wall = wall;
    self->last = self->semantic = last;
    self->room = room;
    self->since = since;
    Py_RETURN_NONE;
}

static PyObject *
Lane_attach(Lane *self, PyObject *scanner)
{
    PyObject *admit = NULL;
    if (check_lane(self) < 0)
        return NULL;
    if (scanner != Py_None) {
        admit = PyObject_GetAttrString(scanner, "admit");
        if (admit == NULL)
            return NULL;
        Py_INCREF(scanner);
        if (!bulk_api_tried) {
            bulk_api_tried = 1;
            const BulkAPI *api = PyCapsule_Import(BULK_API_CAPSULE, 0);
            if (api == NULL)
                PyErr_Clear(); /* no _bulk: the bound admit() it is */
            else if (api->version == BULK_API_VERSION)
                bulk_api = api;
        }
    }
    self->admit_c = bulk_api != NULL && scanner != Py_None && Py_TYPE(scanner) == bulk_api->scanner_type
                        ? bulk_api->admit
                        : NULL;
    Py_XSETREF(self->admit, admit);
    Py_XSETREF(self->scanner, scanner == Py_None ? NULL : scanner);
    Py_RETURN_NONE;
}

static PyObject *
Lane_close(Lane *self, PyObject *Py_UNUSED(ignored))
{
    if (check_lane(self) < 0)
        return NULL;
    self->horizon = -INFINITY;
    Py_RETURN_NONE;
}

static PyObject *
Lane_take(Lane *self, PyObject *Py_UNUSED(ignored))
{
    if (check_lane(self) < 0)
        return NULL;
    PyObject *out = Py_BuildValue("(nnddnndd)", self->reads, self->nbytes, self->last, self->max_gap, self->room,
                                  self->frames, self->semantic, self->max_semantic_gap);
    if (out == NULL)
        return NULL;
    self->reads = 0;
    self->frames = 0;
    self->nbytes = 0;
    self->max_gap = 0.0;
    self->max_semantic_gap = 0.0;
    return out;
}

static PyObject *
Lane_take_beats(Lane *self, PyObject *Py_UNUSED(ignored))
{
    if (check_lane(self) < 0)
        return NULL;
    PyObject *fresh = PyList_New(0);
    if (fresh == NULL)
        return NULL;
    PyObject *out = self->beats;
    self->beats = fresh;
    self->heartbeats = 0;
    return out;
}

static PyMemberDef Lane_members[] = {
    {"heartbeats", T_PYSSIZET, offsetof(Lane, heartbeats), READONLY, "heartbeat frames of the reads in take_beats()"},
    {"since", T_PYSSIZET, offsetof(Lane, since), READONLY,
     "heartbeat frames after the last semantic frame read"},
    {"reads", T_PYSSIZET, offsetof(Lane, reads), READONLY, "steady reads since the last take()"},
    {"frames", T_PYSSIZET, offsetof(Lane, frames), READONLY, "frames of those reads"},
    {"horizon", T_DOUBLE, offsetof(Lane, horizon), READONLY, "reads before this time need no decision"},
    {"room", T_PYSSIZET, offsetof(Lane, room), READONLY, "prefix bytes that may still be kept"},
    {"last", T_DOUBLE, offsetof(Lane, last), READONLY, "time of the last read"},
    {"semantic", T_DOUBLE, offsetof(Lane, semantic), READONLY, "time of the last read that held a semantic frame"},
    {NULL},
};

static PyMethodDef Lane_methods[] = {
    {"step", (PyCFunction)(void (*)(void))Lane_step, METH_FASTCALL,
     "step($self, chunk, now, /)\n--\n\nadmit one read if it is steady"},
    {"take_beats", (PyCFunction)Lane_take_beats, METH_NOARGS,
     "take_beats($self, /)\n--\n\nthe (time, count) of each admitted read that held heartbeats, since the last call"},
    {"open", (PyCFunction)Lane_open, METH_VARARGS,
     "open($self, horizon, step, wall, last, room, since=0, /)\n--\n\nre-arm the lane (horizon=-inf closes it)"},
    {"attach", (PyCFunction)Lane_attach, METH_O,
     "attach($self, scanner, /)\n--\n\nadmit reads through a bulk scanner (None: detach)"},
    {"close", (PyCFunction)Lane_close, METH_NOARGS, "close($self, /)\n--\n\nclose the lane"},
    {"take", (PyCFunction)Lane_take, METH_NOARGS,
     "take($self, /)\n--\n\n(reads, nbytes, last, max_gap, room, frames, semantic, max_semantic_gap); resets the counts"},
    {NULL},
};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "otel_liveness.core.wire._lane.Lane",
    .tp_doc = "Lane(keep)\n--\n\nThe steady lane (C): otel_liveness.core.wire.lane.LaneLike, as PyLane.",
    .tp_basicsize = sizeof(Lane),
    .tp_itemsize = 0,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Lane_init,
    .tp_dealloc = (destructor)Lane_dealloc,
    .tp_traverse = (traverseproc)Lane_traverse,
    .tp_clear = (inquiry)Lane_clear,
    .tp_methods = Lane_methods,
    .tp_members = Lane_members,
};

static struct PyModuleDef lanemodule = {
    PyModuleDef_HEAD_INIT,
    .m_name = "otel_liveness.core.wire._lane",
    .m_doc = "The steady lane in C (see otel_liveness.core.wire.lane).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__lane(void)
{
    if (PyType_Ready(&LaneType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&lanemodule);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LaneType);
    if (PyModule_AddObject(m, "Lane", (PyObject *)&LaneType) < 0) {
        Py_DECREF(&LaneType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
