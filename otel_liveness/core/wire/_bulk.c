/* The bulk path in C: the SSE scanner and the head classifier of otel_liveness/core/wire/bulk.py's
 * PyScanner (the reference; tests/test_bulk.py keeps the two equal), for reads that carry many
 * events. Pure: no clock, no I/O.
 *
 * One read costs: memchr for CR (normalisation is the rare path), then per block one memcmp
 * against the profile's fast prefixes (a handful) and one or two memchr for the blank line that
 * ends it; only a block no prefix matches becomes a bytes object, handed to the Python
 * classifier (the fact-bearing frames: message_start, message_delta, errors...). The kinds come
 * back as one list.
 *
 * Besides the kinds, the scanner keeps two things a truncation needs without keeping the reply:
 *   - the journal (Anthropic wires): the content events in a compact form. This file says which
 *     blocks are content and which is an error; the writer is _journal.h (the C half of
 *     core/wire/journal.py, whose replay_journal decodes it into the partial message when a truncation
 *     is raised). Bounded by journal_max (clipped beyond it); stopped at the first error frame.
 *   - the hold (before content): the blocks that are not heartbeats, each with its blank line,
 *     so that held heartbeats need not be replayed byte for byte (see the engine).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bulk_api.h"

#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

#define MAX_KEYS 16
#define SPAN_STACK 256

typedef struct {
    char *buf;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

static int
buf_reserve(Buf *b, Py_ssize_t extra)
{
    Py_ssize_t need = b->len + extra;
    if (need <= b->cap)
        return 0;
    /* doubling while small, then a quarter more at a time (the journal has its own, journal_put):
       a large frame in progress is kept while it lasts, and memory per stream is what 1,000
       concurrent streams pay for; the copies stay amortised O(1) a byte */
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap < 16384 ? cap * 2 : cap < ((Py_ssize_t)1 << 40) ? cap + cap / 4 : need;
    char *p = PyMem_Realloc(b->buf, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->buf = p;
    b->cap = cap;
    return 0;
}

static int
buf_append(Buf *b, const char *s, Py_ssize_t n)
{
    if (n <= 0)
        return 0;
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->buf + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

static void
buf_free(Buf *b)
{
    PyMem_Free(b->buf);
    b->buf = NULL;
    b->len = b->cap = 0;
}

/* Keep per-stream memory proportional to what is held: give back a large buffer that emptied. */
static void
buf_trim(Buf *b)
{
    if (b->len == 0 && b->cap > 4096) {
        buf_free(b);
    }
    else if (b->cap > 65536 && b->len < b->cap / 4) {
        Py_ssize_t cap = b->len * 2;
        char *p = PyMem_Realloc(b->buf, (size_t)cap);
        if (p != NULL) {
            b->buf = p;
            b->cap = cap;
        }
    }
}

/* Equality of short byte strings, 8 bytes at a time (no library call for a few dozen bytes). */
static inline uint64_t
load8(const char *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

static inline int
mem_eq(const char *a, const char *b, Py_ssize_t n)
{
    if (n >= 8) {
        /* branch-free: the compares of a template all run (they nearly always match) */
        uint64_t diff = 0;
        Py_ssize_t i = 0;
        for (; i + 8 <= n; i += 8)
            diff |= load8(a + i) ^ load8(b + i);
        if (i < n)
            diff |= load8(a + n - 8) ^ load8(b + n - 8); /* the tail as one overlapping word */
        return diff == 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (a[i] != b[i])
            return 0;
    }
    return 1;
}

/* memcpy for the few bytes a delta's text usually is, without a library call */
static inline void
copy_small(char *dst, const char *src, Py_ssize_t n)
{
    /* fixed-size moves only (a byte loop would be turned back into a memcpy call) */
    if (n >= 8 && n <= 16) {
        uint64_t a = load8(src), b = load8(src + n - 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    }
    else if (n >= 4 && n < 8) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    }
    else if (n > 0 && n < 4) {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
    else if (n > 16 && n <= 32) {
        uint64_t a = load8(src), b = load8(src + 8), c = load8(src + n - 16), d = load8(src + n - 8);
        memcpy(dst, &a, 8);
        memcpy(dst + 8, &b, 8);
        memcpy(dst + n - 16, &c, 8);
        memcpy(dst + n - 8, &d, 8);
    }
    else if (n > 32) {
        memcpy(dst, src, (size_t)n);
    }
}

/* The content journal's writer (core/wire/journal.py's Journal, in C): its state, the canonical-delta
 * parser and the record writer, one unit. */
#include "_journal.h"

typedef struct {
    PyObject_HEAD
    /* What an admitted read touches comes first, together (a few cache lines: between reads of a
       live stream the caller's own work evicts them, so each line is a miss on every read); the
       keys' tables, read only on the general path and on a frame no fused delta matched, last. */
    int ready;               /* __init__ ran (tp_alloc zero-fills: a fresh object is not ready) */
    int busy;                /* a call is in progress (it may call the classifier, i.e. Python) */
    int started;
    int pending_cr;
    Py_ssize_t max_frame;
    Py_ssize_t prefix;
    Py_ssize_t delta_key;    /* the key that is the head of a content_block_delta, or -1 */
    int delta_fused;         /* it is, and its kind is semantic: admit() parses deltas in one pass */
    PyObject *heartbeat, *preamble, *semantic, *error; /* borrowed from roles */
    char beating;            /* admit() takes heartbeat frames among semantic ones (its owner counts them) */
    Py_ssize_t beats;        /* heartbeat frames of the last admitted read */
    Py_ssize_t trailing;     /* ... of them, after its last semantic frame */
    PyObject *hold;          /* list, or NULL */
    Buf pend;                /* the block in progress, LF-normalised (or the start of a BOM) */
    Journal journal;         /* (_journal.h) */
    int colon_keys;          /* a key starts with ':': a comment line may be a fast frame */
    Py_ssize_t nkeys;
    PyObject *fast;          /* tuple of (bytes, kind) */
    PyObject *slow;          /* callable(block) -> list of kinds */
    PyObject *comment;       /* the kind of a comment line */
    PyObject *roles;         /* (heartbeat, preamble, semantic, error) */
    Py_ssize_t discarded;
    Buf norm;                /* scratch: a normalised read */
    const char *kbuf[MAX_KEYS];
    Py_ssize_t klen[MAX_KEYS];
    PyObject *kkind[MAX_KEYS]; /* borrowed from fast */
    int kskip[MAX_KEYS];     /* the key holds no blank line: a block's end is searched past it */
} Scanner;

/* Every entry point that reads the scanner's state checks `ready` first: an object whose
 * __init__ never ran (Scanner.__new__(Scanner), a subclass that skips it, a failed __init__)
 * holds NULLs where the classifier and the kinds belong. */
static int
check_ready(Scanner *s)
{
    if (!s->ready) {
        PyErr_SetString(PyExc_RuntimeError, "Scanner.__init__() was not called");
        return -1;
    }
    return 0;
}

/* The calls that change the scanner take it for their whole length: the classifier they may call
 * is Python, which may feed the same scanner (or let another thread do so) while a block of
 * pend or norm is being read. That is refused, not raced. */
static int
enter(Scanner *s)
{
    if (check_ready(s) < 0)
        return -1;
    if (s->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Scanner is busy: a call on it is in progress (a classifier may not feed the scanner it classifies for)");
        return -1;
    }
    s->busy = 1;
    return 0;
}

static PyObject *frame_too_large = NULL;

static int
raise_too_large(Py_ssize_t size, Py_ssize_t limit)
{
    if (frame_too_large == NULL) {
        PyObject *mod = PyImport_ImportModule("otel_liveness.core.errors");
        if (mod == NULL)
            return -1;
        frame_too_large = PyObject_GetAttrString(mod, "FrameTooLarge");
        Py_DECREF(mod);
        if (frame_too_large == NULL)
            return -1;
    }
    PyObject *exc = PyObject_CallFunction(frame_too_large, "nn", size, limit);
    if (exc == NULL)
        return -1;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return -1;
}

static int
Scanner_traverse(Scanner *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fast);
    Py_VISIT(self->slow);
    Py_VISIT(self->comment);
    Py_VISIT(self->roles);
    Py_VISIT(self->hold);
    return 0;
}

static int
Scanner_clear(Scanner *self)
{
    Py_CLEAR(self->fast);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->comment);
    Py_CLEAR(self->roles);
    Py_CLEAR(self->hold);
    self->nkeys = 0;
    self->ready = 0; /* the references are gone: no call may use them */
    return 0;
}

static void
Scanner_dealloc(Scanner *self)
{
    PyObject_GC_UnTrack(self);
    Scanner_clear(self);
    buf_free(&self->pend);
    buf_free(&self->journal.data);
    buf_free(&self->norm);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
Scanner_init(Scanner *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"max_frame_bytes", "fast", "slow", "comment", "roles", "journal_max", "prefix", NULL};
    Py_ssize_t max_frame, journal_max = -1, prefix = 27;
    PyObject *fast, *slow, *comment, *roles;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Scanner is busy: it cannot be re-initialised during a call on it");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nOOOO|nn", kwlist, &max_frame, &fast, &slow, &comment, &roles,
                                     &journal_max, &prefix))
        return -1;
    if (max_frame <= 0 || prefix < 1) {
        PyErr_SetString(PyExc_ValueError, "max_frame_bytes must be positive");
        return -1;
    }
    PyObject *ft = PySequence_Tuple(fast);
    if (ft == NULL)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(ft);
    if (n > MAX_KEYS) {
        Py_DECREF(ft);
        PyErr_SetString(PyExc_ValueError, "too many fast prefixes");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(ft, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0))) {
            Py_DECREF(ft);
            PyErr_SetString(PyExc_TypeError, "fast must hold (bytes, kind) pairs");
            return -1;
        }
    }
    if (!PyTuple_Check(roles) || PyTuple_GET_SIZE(roles) != 4) {
        Py_DECREF(ft);
        PyErr_SetString(PyExc_TypeError, "roles must be (heartbeat, preamble, semantic, error)");
        return -1;
    }
    if (!PyCallable_Check(slow)) {
        Py_DECREF(ft);
        PyErr_SetString(PyExc_TypeError, "slow must be callable");
        return -1;
    }
    self->ready = 0; /* until the new state is complete */
    Scanner_clear(self);
    self->fast = ft;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(ft, i);
        PyObject *key = PyTuple_GET_ITEM(item, 0);
        self->kbuf[i] = PyBytes_AS_STRING(key);
        self->klen[i] = PyBytes_GET_SIZE(key);
        self->kkind[i] = PyTuple_GET_ITEM(item, 1);
        self->kskip[i] = self->klen[i] == prefix;
        for (Py_ssize_t j = 0; j + 1 < self->klen[i]; j++) {
            if (self->kbuf[i][j] == '\n' && self->kbuf[i][j + 1] == '\n')
                self->kskip[i] = 0;
        }
    }
    self->nkeys = n;
    self->delta_key = -1;
    self->colon_keys = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (self->klen[i] > 0 && self->kbuf[i][0] == ':')
            self->colon_keys = 1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* the first such key, as fast_index() and the reference's table (first match wins) */
        if (self->delta_key < 0 && self->klen[i] == prefix && prefix <= (Py_ssize_t)sizeof(DELTA_HEAD) - 1
            && memcmp(self->kbuf[i], DELTA_HEAD, (size_t)prefix) == 0)
            self->delta_key = i;
    }
    Py_INCREF(slow);
    self->slow = slow;
    Py_INCREF(comment);
    self->comment = comment;
    Py_INCREF(roles);
    self->roles = roles;
    self->heartbeat = PyTuple_GET_ITEM(roles, 0);
    self->preamble = PyTuple_GET_ITEM(roles, 1);
    self->semantic = PyTuple_GET_ITEM(roles, 2);
    self->error = PyTuple_GET_ITEM(roles, 3);
    self->delta_fused = self->delta_key >= 0 && self->kkind[self->delta_key] == self->semantic;
    self->hold = NULL;
    self->max_frame = max_frame;
    self->prefix = prefix;
    self->beating = 0;
    self->beats = self->trailing = 0;
    self->pend.len = 0;
    journal_init(&self->journal, journal_max);
    self->started = 0;
    self->pending_cr = 0;
    self->discarded = 0;
    self->ready = 1;
    return 0;
}

/* -- classification ---------------------------------------------------------------------------- */

/* The index of the fast prefix the block b[0:n] starts with, or -1: dict.get(block[:prefix])
 * semantics (a key matches the block's first min(n, prefix) bytes, lengths equal). */
static inline Py_ssize_t
fast_index(Scanner *s, const char *b, Py_ssize_t n)
{
    Py_ssize_t k = n < s->prefix ? n : s->prefix;
    for (Py_ssize_t i = 0; i < s->nkeys; i++) {
        if (s->klen[i] == k && mem_eq(s->kbuf[i], b, k))
            return i;
    }
    return -1;
}


/* The number of lines of a block made of comment lines only (each a heartbeat frame), else 0. */
static Py_ssize_t
comment_lines(const char *b, Py_ssize_t n)
{
    Py_ssize_t lines = 0, p = 0;
    while (p < n) {
        if (b[p] != ':')
            return 0;
        lines++;
        const char *lf = memchr(b + p, '\n', (size_t)(n - p));
        if (lf == NULL)
            break;
        p = (lf - b) + 1;
    }
    return lines;
}

/* What a classified block means for the journal and the hold. Comment lines at the head of a
 * block are heartbeats of their own: neither keeps them. */
static int
account(Scanner *s, const char *b, Py_ssize_t n, PyObject *const *kinds, Py_ssize_t nk, Py_ssize_t key,
        const Delta *dl)
{
    /* key: the fast prefix the block matched (-1: none or not known); dl: its parse, if done */
    Py_ssize_t known = key >= 0 && key == s->delta_key ? s->prefix : 0;
    while (n > 0 && b[0] == ':') {
        known = 0;
        dl = NULL;
        const char *lf = memchr(b, '\n', (size_t)n);
        if (lf == NULL)
            return 0;
        n -= (lf - b) + 1;
        b = lf + 1;
    }
    int content = 0, error = 0, other = 0;
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *k = kinds[i];
        if (k == s->error)
            error = 1;
        else if (k == s->semantic || k == s->preamble)
            content = 1;
        if (k != s->heartbeat)
            other = 1;
    }
    if (journal_writing(&s->journal)) {
        if (error)
            s->journal.state = JOURNAL_STOPPED;
        else if (content && journal_block(&s->journal, b, n, known, dl) < 0)
            return -1;
    }
    if (s->hold != NULL && other) {
        PyObject *framed = PyBytes_FromStringAndSize(NULL, n + 2);
        if (framed == NULL)
            return -1;
        char *f = PyBytes_AS_STRING(framed);
        memcpy(f, b, (size_t)n);
        f[n] = '\n';
        f[n + 1] = '\n';
        int rc = PyList_Append(s->hold, framed);
        Py_DECREF(framed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Classify one block into `out` (kinds mode) or append it (blocks mode). `key`: its fast prefix
 * when already known (-1: none), -2 when not looked up yet. */
static int
emit(Scanner *s, const char *b, Py_ssize_t n, PyObject *out, int blocks_mode, Py_ssize_t key, const Delta *dl)
{
    if (blocks_mode) {
        PyObject *blk = PyBytes_FromStringAndSize(b, n);
        if (blk == NULL)
            return -1;
        int rc = PyList_Append(out, blk);
        Py_DECREF(blk);
        return rc;
    }
    if (key == -2)
        key = fast_index(s, b, n);
    if (key >= 0) {
        PyObject *kind = s->kkind[key];
        if (PyList_Append(out, kind) < 0)
            return -1;
        if (kind == s->heartbeat && s->hold == NULL)
            return 0;
        return account(s, b, n, &kind, 1, key, dl);
    }
    Py_ssize_t lines = b[0] == ':' ? comment_lines(b, n) : 0;
    if (lines > 0) {
        for (Py_ssize_t i = 0; i < lines; i++) {
            if (PyList_Append(out, s->comment) < 0)
                return -1;
        }
        if (s->comment == s->heartbeat)
            return 0;
        PyObject *kinds[1] = {s->comment};
        return account(s, b, n, kinds, 1, -1, NULL);
    }
    PyObject *blk = PyBytes_FromStringAndSize(b, n);
    if (blk == NULL)
        return -1;
    PyObject *res = PyObject_CallOneArg(s->slow, blk);
    if (res == NULL) {
        Py_DECREF(blk);
        return -1;
    }
    PyObject *seq = PySequence_Fast(res, "the classifier must return a list");
    Py_DECREF(res);
    if (seq == NULL) {
        Py_DECREF(blk);
        return -1;
    }
    Py_ssize_t nk = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    int rc = 0;
    for (Py_ssize_t i = 0; i < nk && rc == 0; i++)
        rc = PyList_Append(out, items[i]);
    if (rc == 0)
        rc = account(s, b, n, items, nk, -1, NULL);
    Py_DECREF(seq);
    Py_DECREF(blk);
    return rc;
}

/* -- scanning ---------------------------------------------------------------------------------- */

static const char BOM[3] = {'\xef', '\xbb', '\xbf'};

/* The BOM at the stream start and CR/CRLF line ends -> LF (the reference's _normalise). Sets
 * data and n to the bytes to scan (possibly none while a BOM is undecided). */
static int
normalise(Scanner *s, const char **data, Py_ssize_t *n)
{
    const char *d = *data;
    Py_ssize_t dn = *n;
    Buf *nb = &s->norm;
    nb->len = 0;
    if (s->pending_cr) {
        if (buf_append(nb, "\r", 1) < 0 || buf_append(nb, d, dn) < 0)
            return -1;
        s->pending_cr = 0;
        d = nb->buf;
        dn = nb->len;
    }
    if (!s->started) {
        /* the head so far: pend (a partial BOM) + d */
        Py_ssize_t hl = s->pend.len + dn;
        if (hl < 3 && memcmp(s->pend.buf ? s->pend.buf : "", BOM, (size_t)s->pend.len) == 0
            && memcmp(d, BOM + s->pend.len, (size_t)dn) == 0) {
            if (buf_append(&s->pend, d, dn) < 0)
                return -1;
            *n = 0;
            return 0;
        }
        s->started = 1;
        Buf head = {NULL, 0, 0};
        if (buf_append(&head, s->pend.buf, s->pend.len) < 0 || buf_append(&head, d, dn) < 0) {
            buf_free(&head);
            return -1;
        }
        s->pend.len = 0;
        Py_ssize_t skip = (head.len >= 3 && memcmp(head.buf, BOM, 3) == 0) ? 3 : 0;
        nb->len = 0;
        if (buf_append(nb, head.buf + skip, head.len - skip) < 0) {
            buf_free(&head);
            return -1;
        }
        buf_free(&head);
        d = nb->buf;
        dn = nb->len;
    }
    if (dn > 0 && memchr(d, '\r', (size_t)dn) != NULL) {
        Buf out = {NULL, 0, 0};
        if (buf_reserve(&out, dn) < 0)
            return -1;
        if (d[dn - 1] == '\r') {
            s->pending_cr = 1;
            dn--;
        }
        Py_ssize_t j = 0;
        for (Py_ssize_t i = 0; i < dn; i++) {
            char c = d[i];
            if (c == '\r') {
                out.buf[j++] = '\n';
                if (i + 1 < dn && d[i + 1] == '\n')
                    i++;
            }
            else {
                out.buf[j++] = c;
            }
        }
        out.len = j;
        buf_free(nb);
        *nb = out;
        d = nb->buf;
        dn = nb->len;
    }
    *data = d;
    *n = dn;
    return 0;
}

/* The first blank line at or after `from` in d[0:n]: the index of its first LF, or -1. */
static Py_ssize_t
find_blank(const char *d, Py_ssize_t from, Py_ssize_t n)
{
    Py_ssize_t p = from;
    while (p + 1 < n) {
        const char *lf = memchr(d + p, '\n', (size_t)(n - 1 - p));
        if (lf == NULL)
            return -1;
        Py_ssize_t q = lf - d;
        if (d[q + 1] == '\n')
            return q;
        p = q + 2; /* d[q+1] is not LF: the next candidate starts after it */
    }
    return -1;
}

typedef struct {
    Py_ssize_t start; /* in d; -1: the straddling block (pend.buf[0:len]) */
    Py_ssize_t len;
    Py_ssize_t key;   /* its fast prefix (-1: none), -2: not looked up */
    int comment;      /* a head comment line of the rest */
    Delta delta;      /* parsed when the block was found by its canonical delta shape */
} Span;

typedef struct {
    Span stack[SPAN_STACK];
    Span *spans;
    Py_ssize_t count, cap;
    Py_ssize_t straddle;  /* length of the straddling block in pend.buf, or -1 */
    Py_ssize_t rest_start; /* the rest: d[rest_start:n], preceded by pend.buf[0:pend.len] if rest_pend */
    int rest_pend;
    Py_ssize_t rest_len;
    Py_ssize_t largest;   /* the longest complete span (a block, or a head comment line of the rest) */
} Scan;

static int
scan_push(Scan *sc, Py_ssize_t start, Py_ssize_t len, int comment, Py_ssize_t key)
{
    if (sc->count == sc->cap) {
        Py_ssize_t cap = sc->cap * 2;
        Span *p;
        if (sc->spans == sc->stack) {
            p = PyMem_Malloc(sizeof(Span) * (size_t)cap);
            if (p != NULL)
                memcpy(p, sc->stack, sizeof(Span) * (size_t)sc->count);
        }
        else {
            p = PyMem_Realloc(sc->spans, sizeof(Span) * (size_t)cap);
        }
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        sc->spans = p;
        sc->cap = cap;
    }
    Span *sp = &sc->spans[sc->count++];
    sp->start = start;
    sp->len = len;
    sp->comment = comment;
    sp->key = key;
    sp->delta.ok = 0;
    if (len > sc->largest)
        sc->largest = len;
    return 0;
}

static void
scan_free(Scan *sc)
{
    if (sc->spans != sc->stack)
        PyMem_Free(sc->spans);
}

/* Split pend + d[0:n] into complete blocks, head comment lines and the rest, without changing
 * the scanner (the straddling block, if any, is assembled in pend's spare capacity). */
static int
scan(Scanner *s, const char *d, Py_ssize_t n, Scan *sc)
{
    sc->spans = sc->stack;
    sc->count = 0;
    sc->cap = SPAN_STACK;
    sc->straddle = -1;
    sc->rest_pend = 0;
    sc->largest = 0;
    Py_ssize_t plen = s->pend.len;
    Py_ssize_t p = 0;
    if (plen > 0) {
        Py_ssize_t q, next, take, blen;
        int ended = 1;
        if (s->pend.buf[plen - 1] == '\n' && n > 0 && d[0] == '\n') {
            take = 0; /* the blank line is pend's last LF + d[0] */
            blen = plen - 1;
            next = 1;
        }
        else if ((q = find_blank(d, 0, n)) >= 0) {
            take = q; /* bytes of d in the block */
            blen = plen + q;
            next = q + 2;
        }
        else {
            ended = 0;
            take = blen = next = 0;
        }
        if (ended) {
            if (buf_reserve(&s->pend, take) < 0)
                return -1;
            memcpy(s->pend.buf + plen, d, (size_t)take);
            sc->straddle = blen;
            if (scan_push(sc, -1, blen, 0, -2) < 0)
                return -1;
            p = next;
        }
        else {
            sc->rest_pend = 1; /* no block ended: the rest is pend + d */
            p = 0;
        }
    }
    if (!sc->rest_pend) {
        for (;;) {
            while (p < n && d[p] == '\n')
                p++;
            if (p >= n)
                break;
            /* a canonical delta (the bulk of a reply) is parsed where it lies, and the parse finds
               its end: no search for the blank line */
            if (s->delta_key >= 0) {
                Delta dl;
                Py_ssize_t len = delta_at(d + p, n - p, &dl);
                if (len > 0) {
                    if (scan_push(sc, p, len, 0, s->delta_key) < 0)
                        return -1;
                    sc->spans[sc->count - 1].delta = dl;
                    p += len + 2;
                    continue;
                }
            }
            /* the head first: past a fast prefix (no blank line in it), the block's end is searched
               from the prefix's last byte on -- one memchr for a typical event, not two */
            Py_ssize_t key = -2, from = p;
            if (n - p > s->prefix) {
                key = fast_index(s, d + p, s->prefix);
                if (key >= 0 && s->kskip[key])
                    from = p + s->prefix - 1;
            }
            Py_ssize_t q = find_blank(d, from, n);
            if (q < 0)
                break;
            if (q - p < s->prefix)
                key = fast_index(s, d + p, q - p); /* a block shorter than the prefix: its own head (a
                                                      shorter key may match it where none of the
                                                      prefix's length did) */
            if (scan_push(sc, p, q - p, 0, key) < 0)
                return -1;
            p = q + 2;
        }
    }
    /* head comment lines of the rest are frames now */
    if (sc->rest_pend) {
        if (s->pend.buf[0] == ':') {
            const char *lf = n > 0 ? memchr(d, '\n', (size_t)n) : NULL;
            if (lf != NULL) {
                Py_ssize_t take = lf - d;
                if (buf_reserve(&s->pend, take) < 0)
                    return -1;
                memcpy(s->pend.buf + plen, d, (size_t)take);
                sc->straddle = plen + take;
                if (scan_push(sc, -1, plen + take, 1, -2) < 0)
                    return -1;
                sc->rest_pend = 0;
                p = take + 1;
                while (p < n && d[p] == '\n')
                    p++;
            }
        }
    }
    if (!sc->rest_pend) {
        while (p < n && d[p] == ':') {
            const char *lf = memchr(d + p, '\n', (size_t)(n - p));
            if (lf == NULL)
                break;
            Py_ssize_t q = lf - d;
            if (scan_push(sc, p, q - p, 1, -2) < 0)
                return -1;
            p = q + 1;
            while (p < n && d[p] == '\n')
                p++;
        }
        sc->rest_start = p;
        sc->rest_len = n - p;
    }
    else {
        sc->rest_start = 0;
        sc->rest_len = plen + n;
    }
    return 0;
}

/* What the bound measures of one complete block (the reference's sse.frame_size): its length, or,
 * with comment lines at its head (each a frame of its own), the largest of those lines and of the
 * frame after them. */
static Py_ssize_t
frame_size(const char *b, Py_ssize_t n)
{
    if (n == 0 || b[0] != ':')
        return n;
    Py_ssize_t largest = 0;
    while (n > 0 && b[0] == ':') {
        const char *lf = memchr(b, '\n', (size_t)n);
        if (lf == NULL)
            break;
        Py_ssize_t line = lf - b;
        if (line > largest)
            largest = line;
        n -= line + 1;
        b = lf + 1;
    }
    return n > largest ? n : largest;
}

/* The frame in progress as the bound measures it: its bytes, a final LF not counted (it may be the
 * first of the blank line that ends the frame). Its last byte is d's (n > 0 in every caller). */
static Py_ssize_t
rest_size(const char *d, Py_ssize_t n, const Scan *sc)
{
    Py_ssize_t len = sc->rest_len;
    return len > 0 && n > 0 && d[n - 1] == '\n' ? len - 1 : len;
}

/* Make the rest the block in progress. */
static int
keep_rest(Scanner *s, const char *d, Py_ssize_t n, Scan *sc)
{
    if (sc->rest_pend) {
        if (buf_append(&s->pend, d, n) < 0)
            return -1;
    }
    else {
        s->pend.len = 0;
        if (buf_append(&s->pend, d + sc->rest_start, sc->rest_len) < 0)
            return -1;
    }
    buf_trim(&s->pend);
    return 0;
}

static const char *
span_bytes(Scanner *s, const char *d, Span *sp)
{
    return sp->start < 0 ? s->pend.buf : d + sp->start;
}

/* Whether every frame the scan found, and the frame in progress, is within the bound; if not,
 * *size is the size FrameTooLarge reports (the reference's: the largest complete frame of the
 * read if one is over, else the frame in progress). The measure does not depend on how the
 * stream was split into reads: see sse.frame_size. */
static int
within_bound(Scanner *s, const char *d, Py_ssize_t n, Scan *sc, Py_ssize_t *size)
{
    const Py_ssize_t limit = s->max_frame;
    if (sc->largest > limit) {
        /* a span's length is its size unless comment lines stand at its head: measure those */
        Py_ssize_t largest = 0;
        for (Py_ssize_t i = 0; i < sc->count; i++) {
            Span *sp = &sc->spans[i];
            if (sp->len <= limit)
                continue;
            Py_ssize_t f = sp->comment ? sp->len : frame_size(span_bytes(s, d, sp), sp->len);
            if (f > largest)
                largest = f;
        }
        if (largest > limit) {
            *size = largest;
            return 0;
        }
    }
    Py_ssize_t rest = rest_size(d, n, sc);
    if (rest > limit) {
        *size = rest;
        return 0;
    }
    return 1;
}

static int
check_bounds(Scanner *s, const char *d, Py_ssize_t n, Scan *sc)
{
    Py_ssize_t size;
    if (!within_bound(s, d, n, sc, &size))
        return raise_too_large(size, s->max_frame);
    return 0;
}

static void
mark(Scanner *s)
{
    journal_mark(&s->journal);
}

/* feed / feed_blocks / close: consume `d` (already normalised), emit into `out`. */
static int
consume(Scanner *s, const char *d, Py_ssize_t n, PyObject *out, int blocks_mode)
{
    Scan sc;
    if (scan(s, d, n, &sc) < 0) {
        scan_free(&sc);
        return -1;
    }
    if (check_bounds(s, d, n, &sc) < 0) {
        scan_free(&sc);
        return -1;
    }
    /* emit reads the straddling block from pend.buf: emit first, then keep the rest */
    for (Py_ssize_t i = 0; i < sc.count; i++) {
        Span *sp = &sc.spans[i];
        if (emit(s, span_bytes(s, d, sp), sp->len, out, blocks_mode, sp->key, &sp->delta) < 0) {
            scan_free(&sc);
            return -1;
        }
    }
    int rc = keep_rest(s, d, n, &sc);
    scan_free(&sc);
    return rc;
}

static PyObject *
feed_common(Scanner *s, PyObject *chunk, int blocks_mode)
{
    if (!PyBytes_Check(chunk)) {
        PyObject *copy = PyBytes_FromObject(chunk);
        if (copy == NULL)
            return NULL;
        PyObject *res = feed_common(s, copy, blocks_mode);
        Py_DECREF(copy);
        return res;
    }
    const char *d = PyBytes_AS_STRING(chunk);
    Py_ssize_t n = PyBytes_GET_SIZE(chunk);
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    if (!blocks_mode)
        mark(s);
    if (n == 0)
        return out;
    if (!s->started || s->pending_cr || memchr(d, '\r', (size_t)n) != NULL) {
        if (normalise(s, &d, &n) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        if (n == 0)
            return out;
    }
    int rc = consume(s, d, n, out, blocks_mode);
    /* the scratch copy of a normalised read (every stream's first read, for the BOM) is not kept
       between reads past a few KiB: per stream it was the size of the first read, for life */
    if (s->norm.cap > 4096)
        buf_free(&s->norm);
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *
Scanner_feed(Scanner *self, PyObject *chunk)
{
    if (enter(self) < 0)
        return NULL;
    PyObject *res = feed_common(self, chunk, 0);
    self->busy = 0;
    return res;
}

static PyObject *
Scanner_feed_blocks(Scanner *self, PyObject *chunk)
{
    if (enter(self) < 0)
        return NULL;
    PyObject *res = feed_common(self, chunk, 1);
    self->busy = 0;
    return res;
}

/* admit(chunk) -> frames: every frame the read completes has a fast prefix of a semantic frame
 * (or, when beating, of a semantic or a heartbeat one: a ping inside a run, or pings alone) --
 * a read that completes none, part of a frame (a network read that ended inside one), is raw
 * progress and admitted too -- it holds no CR and stays within the bounds: consumed as feed()
 * would (the journal and the hold too), and the number of frames is returned. Otherwise -1 and
 * nothing changed. */
/* admit() for a read that starts at a block boundary, with nothing held: one pass, journaling as
 * it goes (rolled back if the read turns out not to be admitted). The same answer as the general
 * path (scan, check every block, account): every complete block has a semantic (or, beating, a
 * heartbeat) fast prefix and is within the bound (a read may complete none), and the rest -- the
 * frame in progress -- is not a head comment line that ended and is within the bound. Returns the
 * frames, -1 to decline (nothing changed), -2 on error, -3 (nothing changed) when the general path
 * must judge the read: a head comment line ended and a fast key starts with ':'. */
static Py_ssize_t
admit_aligned(Scanner *s, const char *d, Py_ssize_t n)
{
    /* a declined read changes nothing, the mark (what retract() restores) included */
    const Py_ssize_t old_len = s->journal.mark_len, old_run = s->journal.mark_run;
    const int old_state = s->journal.mark_state;
    const uint32_t old_run_len = s->journal.mark_run_len;
    mark(s);
    const int fused = s->delta_fused;
    Py_ssize_t frames = 0, p = 0, beats = 0, trailing = 0;
    /* The journal's open run -- its last record, when that is a run of deltas -- in locals while the
       read's deltas extend it: the journal's length and the run's (in its header) are written back
       once (RUN_SYNC), before anything else reads or writes the journal, not delta by delta. */
    Journal *const jr = &s->journal;
    Py_ssize_t run = -1, jlen = 0, jroom = 0;
    char run_code = 0;
    uint32_t run_index = 0, run_add = 0;
#define RUN_LOAD()                                                                                \
    do {                                                                                          \
        run = journal_writing(jr) ? jr->run : -1;                                                 \
        if (run >= 0) {                                                                           \
            run_code = jr->data.buf[run];                                                         \
            run_index = get_u32(jr->data.buf + run + 1);                                          \
            jlen = jr->data.len;                                                                  \
            jroom = (jr->data.cap < jr->max ? jr->data.cap : jr->max) - jlen;                     \
        }                                                                                         \
    } while (0)
#define RUN_SYNC()                                                                                \
    do {                                                                                          \
        if (run_add) {                                                                            \
            jr->data.len = jlen;                                                                  \
            put_u32(jr->data.buf + run + 5, get_u32(jr->data.buf + run + 5) + run_add);           \
            run_add = 0;                                                                          \
        }                                                                                         \
    } while (0)
    RUN_LOAD();
    for (;;) {
        while (p < n && d[p] == '\n')
            p++;
        if (p >= n)
            break;
        Delta dl;
        dl.ok = 0;
        Py_ssize_t len = fused ? delta_at(d + p, n - p, &dl) : -1;
        Py_ssize_t key = s->delta_key;
        if (len < 0) {
            key = n - p > s->prefix ? fast_index(s, d + p, s->prefix) : -2;
            Py_ssize_t from = key >= 0 && s->kskip[key] ? p + s->prefix - 1 : p;
            Py_ssize_t q = find_blank(d, from, n);
            if (q < 0)
                break; /* the frame in progress: judged when it completes */
            len = q - p;
            if (key == -2 || len < s->prefix)
                key = fast_index(s, d + p, len);
            if (key < 0 || memchr(d + p, '\r', (size_t)len) != NULL)
                goto decline;
            if (s->kkind[key] == s->heartbeat && s->beating) {
                /* a heartbeat inside the run (a fast prefix says so): counted, never journaled */
                if (len > s->max_frame && frame_size(d + p, len) > s->max_frame)
                    goto decline;
                beats++;
                trailing++;
                frames++;
                p += len + 2;
                continue;
            }
            if (s->kkind[key] != s->semantic)
                goto decline;
        }
        trailing = 0;
        if (len > s->max_frame && frame_size(d + p, len) > s->max_frame)
            goto decline;
        if (journal_writing(&s->journal)) {
            /* as account(): comment lines at the block's head (a fast key may start with ':') are
               heartbeats of their own, not journaled */
            const char *jb = d + p;
            Py_ssize_t jn = len, known = key == s->delta_key ? s->prefix : 0;
            const Delta *jd = &dl;
            while (jn > 0 && jb[0] == ':') {
                const char *lf = memchr(jb, '\n', (size_t)jn);
                known = 0;
                jd = NULL;
                jn = lf == NULL ? 0 : jn - ((lf - jb) + 1);
                jb = lf == NULL ? jb : lf + 1;
            }
            if (jd == &dl && dl.ok && run >= 0 && dl.code == run_code && dl.index == run_index && dl.flen < 128
                && 1 + dl.flen <= jroom) {
                /* one more delta of the open run: journal_block()'s in-place case */
                char *w = jr->data.buf + jlen;
                w[0] = (char)dl.flen;
                copy_small(w + 1, jb + dl.foff, dl.flen);
                jlen += 1 + dl.flen;
                jroom -= 1 + dl.flen;
                run_add += (uint32_t)(1 + dl.flen);
            }
            else if (jn > 0) {
                RUN_SYNC();
                if (journal_block(jr, jb, jn, known, jd) < 0)
                    return -2;
                RUN_LOAD();
            }
        }
        frames++;
        p += len + 2;
    }
    RUN_SYNC(); /* (a declined read is then rolled back to its mark: the journal as it was) */
#undef RUN_LOAD
#undef RUN_SYNC
    /* no CR in what the loop did not parse: the blank lines it skipped and stepped over are LFs, a
       canonical delta has none (delta_at), a block found by its blank line was searched above */
    if (p < n && memchr(d + p, '\r', (size_t)(n - p)) != NULL)
        goto decline;
    if (p < n && d[p] == ':' && memchr(d + p, '\n', (size_t)(n - p)) != NULL) {
        /* a head comment line ended: a frame of its own, a heartbeat unless a fast key starting
           with ':' says otherwise (then the general path judges it) */
        if (s->colon_keys) {
            frames = -3;
            goto rollback;
        }
        goto decline;
    }
    if ((n - p) - (p < n && d[n - 1] == '\n') > s->max_frame)
        goto decline; /* (the frame in progress as the bound measures it: a final LF not counted) */
    s->pend.len = 0;
    if (buf_append(&s->pend, d + p, n - p) < 0)
        return -2;
    buf_trim(&s->pend);
    s->beats = beats;
    s->trailing = trailing;
    return frames;
decline:
    frames = -1;
rollback:
    journal_retract(&s->journal);
    s->journal.mark_len = old_len;
    s->journal.mark_state = old_state;
    s->journal.mark_run = old_run;
    s->journal.mark_run_len = old_run_len;
    return frames;
}

/* admit() without the boxing: the frames, -1 (declined: nothing changed) or -2 (an error is set).
 * The scanner is entered (busy) by the caller. */
static Py_ssize_t
admit_frames(Scanner *self, PyObject *chunk)
{
    if (!PyBytes_CheckExact(chunk) || !self->started || self->pending_cr)
        return -1;
    const char *d = PyBytes_AS_STRING(chunk);
    Py_ssize_t n = PyBytes_GET_SIZE(chunk);
    if (n == 0)
        return -1;
    if (self->pend.len == 0 && self->hold == NULL) {
        /* (it declines a read with a CR anywhere itself, looking only where its parse did not: one
           pass over the read fewer: ~0.2 us of a 7 KB read's ~0.9 us) */
        Py_ssize_t frames = admit_aligned(self, d, n);
        if (frames != -3)
            return frames;
    }
    if (memchr(d, '\r', (size_t)n) != NULL)
        return -1; /* a CR is a line end: the general path normalises it */
    Scan sc;
    if (scan(self, d, n, &sc) < 0) {
        scan_free(&sc);
        return -2;
    }
    Py_ssize_t count = sc.count;
    Py_ssize_t size;
    int ok = within_bound(self, d, n, &sc, &size); /* (no frame completed: raw progress, admitted) */
    Py_ssize_t beats = 0, trailing = 0;
    for (Py_ssize_t i = 0; ok && i < count; i++) {
        Span *sp = &sc.spans[i];
        if (sp->key == -2)
            sp->key = fast_index(self, span_bytes(self, d, sp), sp->len);
        ok = sp->key >= 0 && (self->kkind[sp->key] == self->semantic
                              || (self->beating && self->kkind[sp->key] == self->heartbeat));
        if (ok && self->kkind[sp->key] == self->heartbeat) {
            beats++;
            trailing++;
        }
        else if (ok) {
            trailing = 0;
        }
    }
    if (!ok) {
        scan_free(&sc);
        return -1;
    }
    mark(self);
    for (Py_ssize_t i = 0; i < count; i++) {
        Span *sp = &sc.spans[i];
        PyObject *kind = self->kkind[sp->key];
        if (account(self, span_bytes(self, d, sp), sp->len, &kind, 1, sp->key, &sp->delta) < 0) {
            scan_free(&sc);
            return -2;
        }
    }
    int rc = keep_rest(self, d, n, &sc);
    scan_free(&sc);
    if (rc < 0)
        return -2;
    self->beats = beats;
    self->trailing = trailing;
    return count;
}

/* The C entry point other extensions call (the steady lane, through the _C_API capsule): as
 * Scanner.admit(chunk) on an exact Scanner, unboxed -- frames, -1 declined, -2 error set. */
static Py_ssize_t
bulk_admit(PyObject *scanner, PyObject *chunk)
{
    Scanner *self = (Scanner *)scanner;
    if (enter(self) < 0)
        return -2;
    Py_ssize_t frames = admit_frames(self, chunk);
    self->busy = 0;
    return frames;
}

/* Scanner.beats and Scanner.trailing, for the lane (bulk_api.h) */
static void
bulk_beats(PyObject *scanner, Py_ssize_t *beats, Py_ssize_t *trailing)
{
    *beats = ((Scanner *)scanner)->beats;
    *trailing = ((Scanner *)scanner)->trailing;
}

static PyObject *
Scanner_admit(Scanner *self, PyObject *chunk)
{
    Py_ssize_t frames = bulk_admit((PyObject *)self, chunk);
    return frames == -2 ? NULL : PyLong_FromSsize_t(frames);
}

static PyObject *
close_common(Scanner *self, PyObject *args, PyObject *kwds, int blocks_mode)
{
    static char *kwlist[] = {"complete_lines", NULL};
    int complete_lines = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$p", kwlist, &complete_lines))
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    if (!blocks_mode)
        mark(self);
    if (self->pending_cr) {
        /* a CR held back at the end of the last read was a line end after all */
        const char *d = "\n";
        Py_ssize_t n = 1;
        if (normalise(self, &d, &n) < 0 || (n > 0 && consume(self, d, n, out, blocks_mode) < 0)) {
            Py_DECREF(out);
            return NULL;
        }
    }
    Buf *pb = &self->pend;
    if (complete_lines && pb->len > 0 && pb->buf[pb->len - 1] == '\n') {
        Py_ssize_t a = 0, b = pb->len;
        while (a < b && pb->buf[a] == '\n')
            a++;
        while (b > a && pb->buf[b - 1] == '\n')
            b--;
        Py_ssize_t rest = b - a;
        if (rest > 0) {
            /* emit may not read pend after it is cleared: copy first */
            Buf tmp = {NULL, 0, 0};
            if (buf_append(&tmp, pb->buf + a, rest) < 0) {
                Py_DECREF(out);
                return NULL;
            }
            pb->len = 0;
            int rc = emit(self, tmp.buf, rest, out, blocks_mode, -2, NULL);
            buf_free(&tmp);
            if (rc < 0) {
                Py_DECREF(out);
                return NULL;
            }
        }
        pb->len = 0;
    }
    self->discarded = self->started ? pb->len : 0;
    pb->len = 0;
    buf_trim(pb);
    self->started = 1;
    self->pending_cr = 0;
    return out;
}

static PyObject *
Scanner_close(Scanner *self, PyObject *args, PyObject *kwds)
{
    if (enter(self) < 0)
        return NULL;
    PyObject *res = close_common(self, args, kwds, 0);
    self->busy = 0;
    return res;
}

static PyObject *
Scanner_close_blocks(Scanner *self, PyObject *args, PyObject *kwds)
{
    if (enter(self) < 0)
        return NULL;
    PyObject *res = close_common(self, args, kwds, 1);
    self->busy = 0;
    return res;
}

static PyObject *
Scanner_pending(Scanner *self, PyObject *Py_UNUSED(ignored))
{
    if (check_ready(self) < 0)
        return NULL;
    /* the block in progress as bytes to replay (a CR held back included) */
    PyObject *out = PyBytes_FromStringAndSize(NULL, self->pend.len + (self->pending_cr ? 1 : 0));
    if (out == NULL)
        return NULL;
    if (self->pend.len)
        memcpy(PyBytes_AS_STRING(out), self->pend.buf, (size_t)self->pend.len);
    if (self->pending_cr)
        PyBytes_AS_STRING(out)[self->pend.len] = '\r';
    return out;
}

static PyObject *
Scanner_journal(Scanner *self, PyObject *Py_UNUSED(ignored))
{
    if (check_ready(self) < 0)
        return NULL;
    return PyBytes_FromStringAndSize(self->journal.data.buf ? self->journal.data.buf : "", self->journal.data.len);
}

static PyObject *
Scanner_retract(Scanner *self, PyObject *Py_UNUSED(ignored))
{
    /* the last read was not released: forget what it added to the journal */
    if (enter(self) < 0)
        return NULL;
    journal_retract(&self->journal);
    self->busy = 0;
    Py_RETURN_NONE;
}

static PyObject *
Scanner_get_idle(Scanner *self, void *closure)
{
    if (check_ready(self) < 0)
        return NULL;
    return PyBool_FromLong(self->pend.len == 0 && self->started && !self->pending_cr);
}

static PyObject *
Scanner_get_buffered(Scanner *self, void *closure)
{
    if (check_ready(self) < 0)
        return NULL;
    /* the frame in progress as the bound measures it: a final LF not counted, nor the start of
       a BOM still undecided at the stream head */
    if (!self->started)
        return PyLong_FromSsize_t(0);
    Py_ssize_t len = self->pend.len;
    return PyLong_FromSsize_t(len > 0 && self->pend.buf[len - 1] == '\n' ? len - 1 : len);
}

static PyObject *
Scanner_get_journal_size(Scanner *self, void *closure)
{
    if (check_ready(self) < 0)
        return NULL;
    return PyLong_FromSsize_t(self->journal.data.len);
}

static PyObject *
Scanner_get_journal_state(Scanner *self, void *closure)
{
    if (check_ready(self) < 0)
        return NULL;
    return PyLong_FromLong(self->journal.state);
}

static PyObject *
Scanner_get_retained(Scanner *self, void *closure)
{
    if (check_ready(self) < 0)
        return NULL;
    /* bytes this scanner holds on to: its buffers' capacities */
    return PyLong_FromSsize_t(self->pend.cap + self->journal.data.cap + self->norm.cap);
}

static PyObject *
Scanner_get_hold(Scanner *self, void *closure)
{
    if (check_ready(self) < 0)
        return NULL;
    if (self->hold == NULL)
        Py_RETURN_NONE;
    Py_INCREF(self->hold);
    return self->hold;
}

static int
Scanner_set_hold(Scanner *self, PyObject *value, void *closure)
{
    if (enter(self) < 0)
        return -1;
    self->busy = 0;
    if (value != NULL && value != Py_None && !PyList_CheckExact(value)) {
        PyErr_SetString(PyExc_TypeError, "hold must be a list or None");
        return -1;
    }
    PyObject *old = self->hold;
    if (value == NULL || value == Py_None) {
        self->hold = NULL;
    }
    else {
        Py_INCREF(value);
        self->hold = value;
    }
    Py_XDECREF(old);
    return 0;
}

static PyGetSetDef Scanner_getset[] = {
    {"idle", (getter)Scanner_get_idle, NULL, "nothing pending and past the stream head", NULL},
    {"buffered", (getter)Scanner_get_buffered, NULL, "bytes held for an incomplete frame", NULL},
    {"journal_size", (getter)Scanner_get_journal_size, NULL, "bytes of the journal", NULL},
    {"journal_state", (getter)Scanner_get_journal_state, NULL, "0 open, 1 clipped, 2 stopped", NULL},
    {"retained", (getter)Scanner_get_retained, NULL, "bytes of memory the scanner's buffers hold", NULL},
    {"hold", (getter)Scanner_get_hold, (setter)Scanner_set_hold, "non-heartbeat blocks (list) or None", NULL},
    {NULL},
};

static PyMemberDef Scanner_members[] = {
    {"discarded", T_PYSSIZET, offsetof(Scanner, discarded), READONLY, "bytes of an unterminated final event"},
    {"max_frame_bytes", T_PYSSIZET, offsetof(Scanner, max_frame), READONLY, "the frame bound"},
    {"beating", T_BOOL, offsetof(Scanner, beating), 0,
     "admit() takes heartbeat frames among semantic ones (beats, trailing say how many)"},
    {"beats", T_PYSSIZET, offsetof(Scanner, beats), READONLY, "heartbeat frames of the last admitted read"},
    {"trailing", T_PYSSIZET, offsetof(Scanner, trailing), READONLY,
     "heartbeat frames of the last admitted read after its last semantic frame"},
    {NULL},
};

static PyMethodDef Scanner_methods[] = {
    {"feed", (PyCFunction)Scanner_feed, METH_O, "feed(chunk) -> kinds of the frames it completed"},
    {"feed_blocks", (PyCFunction)Scanner_feed_blocks, METH_O, "feed_blocks(chunk) -> the blocks it completed"},
    {"admit", (PyCFunction)Scanner_admit, METH_O, "admit(chunk) -> frames, or -1 (nothing changed)"},
    {"close", (PyCFunction)(void (*)(void))Scanner_close, METH_VARARGS | METH_KEYWORDS, "close(*, complete_lines=False) -> kinds"},
    {"close_blocks", (PyCFunction)(void (*)(void))Scanner_close_blocks, METH_VARARGS | METH_KEYWORDS,
     "close_blocks(*, complete_lines=False) -> blocks"},
    {"pending", (PyCFunction)Scanner_pending, METH_NOARGS, "the block in progress, to replay"},
    {"journal", (PyCFunction)Scanner_journal, METH_NOARGS, "the journal (bytes)"},
    {"retract", (PyCFunction)Scanner_retract, METH_NOARGS, "undo the last read's journal records"},
    {NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "otel_liveness.core.wire._bulk.Scanner",
    .tp_doc = "The bulk SSE scanner and head classifier (C); see otel_liveness.core.wire.bulk.PyScanner.",
    .tp_basicsize = sizeof(Scanner),
    .tp_itemsize = 0,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_traverse = (traverseproc)Scanner_traverse,
    .tp_clear = (inquiry)Scanner_clear,
    .tp_methods = Scanner_methods,
    .tp_members = Scanner_members,
    .tp_getset = Scanner_getset,
};

/* blank_lines(data) -> the number of blank lines (LF LF) in data, found by memchr alone: the
 * floor the transport benchmark compares with (framing a read at its least: one C scan, no
 * classification, no journal, no state). Not used by the scanner. */
static PyObject *
bulk_blank_lines(PyObject *module, PyObject *data)
{
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "blank_lines(data): data must be bytes");
        return NULL;
    }
    const char *d = PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data), count = 0, p = 0, q;
    while ((q = find_blank(d, p, n)) >= 0) {
        count++;
        p = q + 2;
    }
    return PyLong_FromSsize_t(count);
}

/* -- top-level members of a JSON request body (otel_liveness/core/wire/members.py is the reference) -- */

#define TOP_MAX_NAMES 8

static inline Py_ssize_t
json_ws(const char *d, Py_ssize_t p, Py_ssize_t n)
{
    while (p < n && (d[p] == ' ' || d[p] == '\t' || d[p] == '\n' || d[p] == '\r'))
        p++;
    return p;
}

/* d[p] is an opening quote: the index after its closing quote, or -1 (unterminated). */
static Py_ssize_t
json_string(const char *d, Py_ssize_t p, Py_ssize_t n)
{
    Py_ssize_t start = p + 1;
    p = start;
    for (;;) {
        const char *hit = p < n ? memchr(d + p, '"', (size_t)(n - p)) : NULL;
        if (hit == NULL)
            return -1;
        Py_ssize_t q = hit - d, b = q;
        while (b > start && d[b - 1] == '\\') /* the backslashes right before the quote */
            b--;
        if ((q - b) & 1) { /* an odd run escapes it */
            p = q + 1;
            continue;
        }
        return q + 1;
    }
}

/* The index after the value at d[p], or -1 (it does not end). */
static Py_ssize_t
json_value(const char *d, Py_ssize_t p, Py_ssize_t n)
{
    if (p >= n)
        return -1;
    char c = d[p];
    if (c == '"')
        return json_string(d, p, n);
    if (c == '{' || c == '[') {
        Py_ssize_t depth = 0;
        while (p < n) {
            c = d[p];
            if (c == '"') {
                p = json_string(d, p, n);
                if (p < 0)
                    return -1;
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0)
                return p + 1;
            p++;
        }
        return -1;
    }
    Py_ssize_t start = p;
    while (p < n && d[p] != ',' && d[p] != '}' && d[p] != ']' && d[p] != ' ' && d[p] != '\t' && d[p] != '\n' &&
           d[p] != '\r')
        p++;
    return p > start ? p : -1;
}

/* top_level(body, names) -> for each name, the raw value of that top-level member (its last
 * occurrence) or None; None when the body is not an object the walk can follow or a key has an
 * escape. The reference, and what is checked and what is not: members.py. */
static PyObject *
bulk_top_level(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "top_level(body, names): names must be a tuple of bytes");
        return NULL;
    }
    PyObject *names = args[1];
    Py_ssize_t nn = PyTuple_GET_SIZE(names);
    if (nn > TOP_MAX_NAMES) {
        PyErr_Format(PyExc_ValueError, "top_level: at most %d names", TOP_MAX_NAMES);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nn; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "top_level(body, names): names must be a tuple of bytes");
            return NULL;
        }
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *d = view.buf;
    Py_ssize_t n = view.len;
    Py_ssize_t at[TOP_MAX_NAMES], len[TOP_MAX_NAMES];
    for (Py_ssize_t i = 0; i < nn; i++)
        at[i] = -1, len[i] = 0;
    int ok = 0;
    Py_ssize_t p = json_ws(d, 0, n);
    if (p < n && d[p] == '{') {
        p = json_ws(d, p + 1, n);
        if (p < n && d[p] == '}') {
            ok = 1;
            p++;
        }
        else {
            for (;;) {
                if (p >= n || d[p] != '"')
                    break;
                Py_ssize_t key_end = json_string(d, p, n);
                if (key_end < 0)
                    break;
                const char *key = d + p + 1;
                Py_ssize_t klen = key_end - 1 - (p + 1);
                if (memchr(key, '\\', (size_t)klen) != NULL)
                    break;
                p = json_ws(d, key_end, n);
                if (p >= n || d[p] != ':')
                    break;
                p = json_ws(d, p + 1, n);
                Py_ssize_t value_end = json_value(d, p, n);
                if (value_end < 0)
                    break;
                for (Py_ssize_t i = 0; i < nn; i++) {
                    PyObject *name = PyTuple_GET_ITEM(names, i);
                    if (PyBytes_GET_SIZE(name) == klen && memcmp(PyBytes_AS_STRING(name), key, (size_t)klen) == 0) {
                        at[i] = p;
                        len[i] = value_end - p;
                    }
                }
                p = json_ws(d, value_end, n);
                if (p < n && d[p] == ',') {
                    p = json_ws(d, p + 1, n);
                    continue;
                }
                if (p < n && d[p] == '}') {
                    ok = 1;
                    p++;
                }
                break;
            }
        }
    }
    if (ok && json_ws(d, p, n) != n)
        ok = 0; /* something after the object */
    PyObject *out = NULL;
    if (!ok) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    out = PyTuple_New(nn);
    if (out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < nn; i++) {
        PyObject *v = at[i] < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize(d + at[i], len[i]);
        if (v == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyTuple_SET_ITEM(out, i, v);
    }
done:
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef bulk_functions[] = {
    {"blank_lines", (PyCFunction)bulk_blank_lines, METH_O, "blank_lines(data) -> blank lines in data (memchr only)"},
    {"top_level", (PyCFunction)(void (*)(void))bulk_top_level, METH_FASTCALL,
     "top_level(body, names) -> the raw values of those top-level members of a JSON object (see members.py)"},
    {NULL},
};

static struct PyModuleDef bulkmodule = {
    PyModuleDef_HEAD_INIT,
    .m_name = "otel_liveness.core.wire._bulk",
    .m_doc = "The bulk SSE scanner in C (see otel_liveness.core.wire.bulk).",
    .m_size = -1,
    .m_methods = bulk_functions,
};

PyMODINIT_FUNC
PyInit__bulk(void)
{
    if (PyType_Ready(&ScannerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&bulkmodule);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(&ScannerType);
        Py_DECREF(m);
        return NULL;
    }
    /* for _lane.c: admit() called from C on an exact Scanner (see bulk_api.h) */
    static BulkAPI api = {BULK_API_VERSION, &ScannerType, bulk_admit, bulk_beats};
    PyObject *capsule = PyCapsule_New(&api, BULK_API_CAPSULE, NULL);
    if (capsule == NULL || PyModule_AddObject(m, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
