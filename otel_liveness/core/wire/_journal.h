/* The content journal's writer in C: the C half of otel_liveness/core/wire/journal.py (the reference:
 * the records are described there, and its Journal writes the same bytes -- tests/test_bulk.py
 * and tests/test_journal.py keep the two equal). One unit: the journal's state (Journal, which
 * the scanner embeds), the canonical-delta parser (the scanner's admit() also uses delta_at to
 * find a delta's end in one pass), the record writer (journal_block), and the mark a read may be
 * retracted to. The scanner decides which blocks are content and which is an error; this writes.
 *
 * Included by _bulk.c alone, after its Buf and its small-copy helpers (load8, mem_eq,
 * copy_small); pure: no clock, no I/O. */

#ifndef OTEL_LIVENESS_JOURNAL_H
#define OTEL_LIVENESS_JOURNAL_H

#define JOURNAL_OPEN 0
#define JOURNAL_CLIPPED 1
#define JOURNAL_STOPPED 2

typedef struct {
    Py_ssize_t max;          /* < 0: no journal */
    int state;
    int mark_state;
    Buf data;
    Py_ssize_t run;          /* offset of the journal's last record if it is a run, else -1 */
    Py_ssize_t mark_len;
    Py_ssize_t mark_run;
    uint32_t mark_run_len;
} Journal;

static const char DELTA_HEAD[] = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":";

static const char DELTA_MID[] = ",\"delta\":{\"type\":\"";
#define DELTA_TYPE_TEXT "text_delta\",\"text\":\""
#define DELTA_TYPE_THINKING "thinking_delta\",\"thinking\":\""
#define DELTA_TYPE_SIGNATURE "signature_delta\",\"signature\":\""
#define DELTA_TYPE_INPUT "input_json_delta\",\"partial_json\":\""
#define DELTA_CODE_TEXT 't'
#define DELTA_CODE_THINKING 'k'
#define DELTA_CODE_SIGNATURE 's'
#define DELTA_CODE_INPUT 'j'


/* little-endian u32 at p (the journal's byte order, whatever the host's) */
static inline void
put_u32(char *p, uint32_t v)
{
#if PY_LITTLE_ENDIAN
    memcpy(p, &v, 4);
#else
    p[0] = (char)(v & 0xff);
    p[1] = (char)((v >> 8) & 0xff);
    p[2] = (char)((v >> 16) & 0xff);
    p[3] = (char)((v >> 24) & 0xff);
#endif
}

static inline uint32_t
get_u32(const char *p)
{
#if PY_LITTLE_ENDIAN
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#else
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] | ((uint32_t)u[1] << 8) | ((uint32_t)u[2] << 16) | ((uint32_t)u[3] << 24);
#endif
}

/* LEB128: 7 bits a byte, low first, the high bit set on all but the last */
static Py_ssize_t
put_varint(char *p, uint32_t v)
{
    Py_ssize_t n = 0;
    while (v >= 0x80) {
        p[n++] = (char)((v & 0x7f) | 0x80);
        v >>= 7;
    }
    p[n++] = (char)v;
    return n;
}

/* A canonical delta, parsed: the journal's code, the block index, the string body (its offset in
 * the block and length). */
typedef struct {
    int ok;
    char code;
    uint32_t index;
    Py_ssize_t foff;
    Py_ssize_t flen;
} Delta;

/* The canonical shape after DELTA_HEAD, from b[hl] on: index digits, DELTA_MID, a delta type and
 * field; returns the offset of the string body, or -1. */
static ALWAYS_INLINE Py_ssize_t
delta_fields(const char *b, Py_ssize_t n, char *code, uint32_t *index)
{
    const Py_ssize_t hl = (Py_ssize_t)sizeof(DELTA_HEAD) - 1;
    Py_ssize_t p = hl;
    uint32_t idx = 0;
    Py_ssize_t digits = 0;
    while (p < n && b[p] >= '0' && b[p] <= '9' && digits < 10) {
        idx = idx * 10 + (uint32_t)(b[p] - '0');
        p++;
        digits++;
    }
    if (digits == 0 || digits > 9 || (digits > 1 && b[hl] == '0'))
        return -1;
    const Py_ssize_t ml = (Py_ssize_t)sizeof(DELTA_MID) - 1;
    if (n - p < ml || !mem_eq(b + p, DELTA_MID, ml))
        return -1;
    p += ml;
    if (p + 2 > n)
        return -1;
    /* the delta type by its first two bytes: te(xt), th(inking), si(gnature), in(put_json); each
       compared as a constant (unrolled) */
#define DELTA_TYPE(t)                                                                             \
    do {                                                                                          \
        if (n - p < (Py_ssize_t)sizeof(DELTA_TYPE_##t) - 1                                          \
            || !mem_eq(b + p, DELTA_TYPE_##t, (Py_ssize_t)sizeof(DELTA_TYPE_##t) - 1))              \
            return -1;                                                                            \
        *code = DELTA_CODE_##t;                                                                   \
        *index = idx;                                                                             \
        return p + (Py_ssize_t)sizeof(DELTA_TYPE_##t) - 1;                                        \
    } while (0)
    switch (b[p]) {
    case 't':
        if (b[p + 1] == 'e')
            DELTA_TYPE(TEXT);
        DELTA_TYPE(THINKING);
    case 's':
        DELTA_TYPE(SIGNATURE);
    case 'i':
        DELTA_TYPE(INPUT);
    default:
        return -1;
    }
#undef DELTA_TYPE
}

/* The end of a JSON string body that starts at d[i]: the index of its first unescaped quote, or
 * -1 when an LF (or, with `cr`, a CR) comes first, a backslash is followed by an LF or ends d[0:n],
 * or no quote ends it in d[0:n]. A backslash always takes the next byte (no escape is decoded or
 * checked here). Eight bytes at a time while they hold none of the bytes that matter: a delta's
 * text runs to tens of bytes, and a byte loop is measurably slower (below). */
#define SWAR_ONES 0x0101010101010101ULL
#define SWAR_HIGHS 0x8080808080808080ULL

static ALWAYS_INLINE uint64_t
swar_has(uint64_t word, uint64_t byte)
{
    /* the high bit of each byte of word equal to byte (exact for the lowest such byte; a byte above
       it may be flagged too, which the caller never looks at) */
    uint64_t x = word ^ (SWAR_ONES * byte);
    return (x - SWAR_ONES) & ~x & SWAR_HIGHS;
}

static ALWAYS_INLINE Py_ssize_t
string_end(const char *d, Py_ssize_t i, Py_ssize_t n, const int cr)
{
    /* the first two bytes one by one: a one-character delta (common) ends before a word is loaded.
       A byte loop cost ~1 ns a byte of text, hence words (SWAR). Measured, 64 deltas a read, ns an
       event with 1- / 24-character deltas: the first two one by one 13.6 / 18.6 (kept); the first
       eight 13.5 / 21.7; none 15.0 / 19.0 (bench_transport) */
    Py_ssize_t quick = i + 2 < n ? i + 2 : n;
    for (;;) {
        while (i < quick) {
            char c = d[i];
            if (c == '"')
                return i;
            if (c == '\\') {
                if (i + 1 >= n || d[i + 1] == '\n' || (cr && d[i + 1] == '\r'))
                    return -1;
                i += 2;
            }
            else if (c == '\n' || (cr && c == '\r')) {
                return -1;
            }
            else {
                i++;
            }
        }
        if (i >= n)
            return -1;
#if PY_LITTLE_ENDIAN && (defined(__GNUC__) || defined(__clang__))
        while (i + 8 <= n) {
            uint64_t w = load8(d + i);
            uint64_t hit = swar_has(w, '"') | swar_has(w, '\\') | swar_has(w, '\n');
            if (cr)
                hit |= swar_has(w, '\r');
            if (hit) {
                i += (Py_ssize_t)(__builtin_ctzll(hit) >> 3);
                break;
            }
            i += 8;
        }
        if (i >= n)
            return -1;
#endif
        quick = i + 1; /* the byte the words stopped at (or the tail, one by one) */
    }
}

/* A canonical delta block at the start of d[0:n], found without knowing where the block ends: its
 * string body runs to the first unescaped quote, which must be followed by '}}' and the blank line.
 * Returns the block's length (the index of the blank line's first LF), or -1: not canonical, or
 * not complete in d (the caller then finds the block's end the general way). */
static ALWAYS_INLINE Py_ssize_t
delta_at(const char *d, Py_ssize_t n, Delta *dl)
{
    const Py_ssize_t hl = (Py_ssize_t)sizeof(DELTA_HEAD) - 1;
    if (n <= hl || !mem_eq(d, DELTA_HEAD, hl))
        return -1;
    Py_ssize_t p = delta_fields(d, n, &dl->code, &dl->index);
    if (p < 0)
        return -1;
    Py_ssize_t i = string_end(d, p, n, 1); /* (a CR is a line end of its own: never canonical) */
    if (i < 0 || i + 4 >= n || d[i + 1] != '}' || d[i + 2] != '}' || d[i + 3] != '\n' || d[i + 4] != '\n')
        return -1;
    dl->ok = 1;
    dl->foff = p;
    dl->flen = i - p;
    return i + 3;
}

/* A content_block_delta of the canonical shape: its code, index and string body. */
static int
canonical_delta(const char *b, Py_ssize_t n, Py_ssize_t known, char *code, uint32_t *index, const char **frag,
                Py_ssize_t *flen)
{
    /* known: how many leading bytes are already known to be DELTA_HEAD's (a fast prefix matched) */
    const Py_ssize_t hl = (Py_ssize_t)sizeof(DELTA_HEAD) - 1;
    if (n < hl + 1 + 3 || !mem_eq(b + known, DELTA_HEAD + known, hl - known))
        return 0;
    /* 0 | [1-9][0-9]{0,8} */
    Py_ssize_t p = delta_fields(b, n, code, index);
    if (p < 0)
        return 0;
    Py_ssize_t end = n - 3; /* '"}}' */
    if (end < p || b[end] != '"' || b[end + 1] != '}' || b[end + 2] != '}')
        return 0;
    /* the string body: no unescaped quote, no LF, a backslash always takes the next byte -- its
       first unescaped quote is the one at end */
    if (string_end(b, p, end + 1, 0) != end)
        return 0;
    *frag = b + p;
    *flen = end - p;
    return 1;
}

static int
journal_put(Journal *jr, const char *head, Py_ssize_t hn, const char *body, Py_ssize_t bn)
{
    if (jr->data.len + hn + bn > jr->max) {
        jr->state = JOURNAL_CLIPPED;
        return 0;
    }
    Buf *j = &jr->data;
    Py_ssize_t need = j->len + hn + bn;
    if (need > j->cap) {
        /* grow by a quarter (the journal is kept for the stream's life: little slack), never past
           the bound */
        Py_ssize_t cap = j->cap + j->cap / 4;
        if (cap < need)
            cap = need;
        if (cap < 1024)
            cap = 1024;
        if (cap > jr->max)
            cap = need > jr->max ? need : jr->max;
        char *p = PyMem_Realloc(j->buf, (size_t)cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        j->buf = p;
        j->cap = cap;
    }
    copy_small(jr->data.buf + jr->data.len, head, hn);
    copy_small(jr->data.buf + jr->data.len + hn, body, bn);
    jr->data.len += hn + bn;
    return 0;
}

/* Record a content block: canonical deltas compactly (a run per block and field), anything else
 * as the block. */
static int
journal_block(Journal *jr, const char *b, Py_ssize_t n, Py_ssize_t known, const Delta *dl)
{
    if (jr->max < 0 || jr->state != JOURNAL_OPEN)
        return 0;
    char code;
    uint32_t index;
    const char *frag;
    Py_ssize_t flen;
    char head[9 + 5];
    int canon;
    if (dl != NULL && dl->ok) {
        canon = 1;
        code = dl->code;
        index = dl->index;
        frag = b + dl->foff;
        flen = dl->flen;
    }
    else {
        canon = canonical_delta(b, n, known, &code, &index, &frag, &flen);
    }
    if (canon) {
        Py_ssize_t run = jr->run;
        Buf *j = &jr->data;
        if (run >= 0 && j->buf[run] == code && get_u32(j->buf + run + 1) == index) {
            /* the same block and field as the last record: extend the run */
            if (flen < 128 && j->len + 1 + flen <= j->cap && j->len + 1 + flen <= jr->max) {
                char *w = j->buf + j->len; /* the common case, in place: one length byte, the body */
                w[0] = (char)flen;
                copy_small(w + 1, frag, flen);
                j->len += 1 + flen;
                put_u32(j->buf + run + 5, get_u32(j->buf + run + 5) + (uint32_t)(1 + flen));
                return 0;
            }
            Py_ssize_t vn = put_varint(head, (uint32_t)flen);
            if (journal_put(jr, head, vn, frag, flen) < 0)
                return -1;
            if (jr->state == JOURNAL_OPEN)
                put_u32(j->buf + run + 5, get_u32(j->buf + run + 5) + (uint32_t)(vn + flen));
            return 0;
        }
        head[0] = code;
        put_u32(head + 1, index);
        Py_ssize_t vn = put_varint(head + 9, (uint32_t)flen);
        put_u32(head + 5, (uint32_t)(vn + flen));
        Py_ssize_t at = jr->data.len;
        if (journal_put(jr, head, 9 + vn, frag, flen) < 0)
            return -1;
        if (jr->state == JOURNAL_OPEN)
            jr->run = at;
        return 0;
    }
    head[0] = 'R';
    put_u32(head + 1, (uint32_t)n);
    jr->run = -1;
    return journal_put(jr, head, 5, b, n);
}

static void
journal_init(Journal *jr, Py_ssize_t max)
{
    /* (a buffer of an earlier __init__ is kept, emptied) */
    jr->max = max;
    jr->state = JOURNAL_OPEN;
    jr->data.len = 0;
    jr->run = -1;
    jr->mark_len = 0;
    jr->mark_state = JOURNAL_OPEN;
    jr->mark_run = -1;
    jr->mark_run_len = 0;
}

/* Kept (max >= 0) and neither stopped nor clipped: a content block would be recorded. */
static inline int
journal_writing(const Journal *jr)
{
    return jr->max >= 0 && jr->state == JOURNAL_OPEN;
}

/* A read begins: what journal_retract() goes back to. */
static inline void
journal_mark(Journal *jr)
{
    jr->mark_len = jr->data.len;
    jr->mark_state = jr->state;
    jr->mark_run = jr->run;
    jr->mark_run_len = jr->run >= 0 ? get_u32(jr->data.buf + jr->run + 5) : 0;
}

/* The last read was not released: forget what it added. */
static inline void
journal_retract(Journal *jr)
{
    jr->data.len = jr->mark_len;
    jr->state = jr->mark_state;
    jr->run = jr->mark_run;
    if (jr->run >= 0)
        put_u32(jr->data.buf + jr->run + 5, jr->mark_run_len);
}

#endif /* OTEL_LIVENESS_JOURNAL_H */
