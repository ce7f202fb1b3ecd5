/* One pass from a Kineto event text straight to per-event columns: the fast path of the loader.
 *
 * scan(text, max_events) takes the text of a JSON array of trace events (the loader's pieces,
 * "[" events "]") and returns (records, strings, raws, resources): one fixed-size record per event (layout
 * in EVENT_FIELDS), the distinct string values the records refer to by index (decoded, in first
 * appearance order), the distinct raw texts of "Input Dims" values (bytes, as in the file), and per
 * kernel name its args "registers per thread" and "shared memory" (int32 triples: the name's string
 * index, -1 for a kernel without a name; the largest value over its events, -1 where none says): a
 * table per name, not a field per event.
 *
 * It returns None -- and the loader decodes that text with msgspec instead -- whenever the text is
 * anything but what msgspec's strict schema (kineto.schema._FastEvent) would decode, or whenever this scan
 * cannot be sure it reads a value exactly as msgspec does: invalid JSON, a value of the wrong type,
 * an integer past 18 digits, a float it cannot read exactly, a key twice, an escaped key, a \u
 * surrogate, nesting past MAX_DEPTH, more than max_events events. So a file either reads
 * here with the same values msgspec gives, or is read by msgspec: the loader's result never
 * depends on this module (the tests compare both paths, column for column).
 *
 * Nothing here runs Python while the text is scanned, so the GIL is released for the scan;
 * floats that need a correctly rounded conversion beyond the exact fast path are kept as
 * (record, field, offset, length) and converted afterwards by CPython's own PyOS_string_to_double.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MAX_DEPTH 200        /* deeper values: declined (msgspec's own limit is recursion-based) */
#define MAX_INT_DIGITS 18    /* every 18-digit integer fits int64 */
#define MAX_SLOW_FLOAT 64    /* longest number text handed to PyOS_string_to_double */

typedef struct {
    double ts, dur;
    int64_t pid, tid, corr, device, stream, graph_id, id;
    int32_t ph, cat, name, kernel, dims, pid_str, tid_str;
    int32_t grid_x, grid_y, grid_z, block_x, block_y, block_z;
    int8_t id_kind, has_stack;
} Event;

/* pid_str / tid_str: -1 the value is an int (in pid/tid), -2 absent, >= 0 a string's index.
 * ph, cat, name, kernel: a string's index, -1 absent. dims: a raw text's index, -1 absent.
 * id_kind: 0 absent or null, 1 an int (in id), 2 any other scalar.
 * grid_* / block_*: args "grid" / "block", an array of three integers (each -1 unless in [0, 2^31));
 * -1 when absent or null. */

enum { OK = 0, DECLINE = 1, NOMEM = 2 };

/* --- a table of distinct byte strings, ids in first-appearance order --------------------- */

typedef struct {
    const char *p;
    Py_ssize_t n;
    uint64_t h;
    char *owned; /* a copy for texts decoded from escapes (the scratch buffer is reused) */
} Key;

typedef struct {
    Key *keys;
    Py_ssize_t count, cap;
    int32_t *slots;
    Py_ssize_t nslots; /* a power of two */
} Table;

static uint64_t hash_bytes(const char *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, (size_t)n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 32;
    return h;
}

static int table_init(Table *t) {
    t->count = 0;
    t->cap = 64;
    t->nslots = 256;
    t->keys = malloc(sizeof(Key) * (size_t)t->cap);
    t->slots = malloc(sizeof(int32_t) * (size_t)t->nslots);
    if (!t->keys || !t->slots) return NOMEM;
    memset(t->slots, 0xFF, sizeof(int32_t) * (size_t)t->nslots);
    return OK;
}

static void table_free(Table *t) {
    if (t->keys) {
        for (Py_ssize_t i = 0; i < t->count; i++) free(t->keys[i].owned);
    }
    free(t->keys);
    free(t->slots);
    t->keys = NULL;
    t->slots = NULL;
}

static int table_grow(Table *t) {
    Py_ssize_t nslots = t->nslots * 2;
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)nslots);
    if (!slots) return NOMEM;
    memset(slots, 0xFF, sizeof(int32_t) * (size_t)nslots);
    for (Py_ssize_t i = 0; i < t->count; i++) {
        Py_ssize_t s = (Py_ssize_t)(t->keys[i].h & (uint64_t)(nslots - 1));
        while (slots[s] >= 0) s = (s + 1) & (nslots - 1);
        slots[s] = (int32_t)i;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return OK;
}

/* The id of p[0:n]; copy: the bytes do not outlive this call (a scratch buffer). */
static int table_intern(Table *t, const char *p, Py_ssize_t n, int copy, int32_t *id) {
    uint64_t h = hash_bytes(p, n);
    Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(t->nslots - 1));
    while (t->slots[s] >= 0) {
        Key *k = &t->keys[t->slots[s]];
        if (k->h == h && k->n == n && memcmp(k->p, p, (size_t)n) == 0) {
            *id = t->slots[s];
            return OK;
        }
        s = (s + 1) & (t->nslots - 1);
    }
    if (t->count >= INT32_MAX - 1) return DECLINE;
    if (t->count == t->cap) {
        Key *keys = realloc(t->keys, sizeof(Key) * (size_t)(t->cap * 2));
        if (!keys) return NOMEM;
        t->keys = keys;
        t->cap *= 2;
    }
    Key *k = &t->keys[t->count];
    k->owned = NULL;
    if (copy) {
        k->owned = malloc((size_t)n + 1);
        if (!k->owned) return NOMEM;
        memcpy(k->owned, p, (size_t)n);
        p = k->owned;
    }
    k->p = p;
    k->n = n;
    k->h = h;
    t->slots[s] = (int32_t)t->count;
    *id = (int32_t)t->count;
    t->count++;
    if (t->count * 2 > t->nslots) return table_grow(t);
    return OK;
}

/* --- the scanner ----------------------------------------------------------------------- */

enum { SLOW_TS, SLOW_DUR, SLOW_CHECK_ONLY };

typedef struct {
    Py_ssize_t event, offset, length;
    int field; /* SLOW_TS, SLOW_DUR or SLOW_CHECK_ONLY */
} SlowFloat;

typedef struct {
    const char *start, *p, *end;
    Table strs, raws;
    char *scratch;
    Py_ssize_t scratch_cap;
    SlowFloat *slow;
    Py_ssize_t nslow, slow_cap;
    Py_ssize_t current; /* index of the event being read */
    int32_t regs, smem;  /* the event being read: its "registers per thread" and "shared memory" args, -1 none */
    int32_t *res;        /* per string index: the largest registers, shared memory of kernels of that name */
    Py_ssize_t res_cap;  /* strings res has room for; entry res_cap (one past) is the kernels without a name */
    int32_t nameless[2];
} Scanner;

static inline void skip_ws(Scanner *s) {
    const char *p = s->p, *end = s->end;
    if (p < end && (unsigned char)*p > ' ') return; /* the usual case: no whitespace */
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    s->p = p;
}

static inline int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string at s->p (the opening quote). On return s->p is past the closing quote; [*body, *body_end)
 * is its text as written; *escaped says whether it holds a backslash, *high whether a byte >= 0x80.
 * Declines control characters, malformed escapes and \u surrogates (msgspec refuses lone ones; pairs
 * are rare enough to leave to it). */
static int scan_string(Scanner *s, const char **body, const char **body_end, int *escaped, int *high) {
    const unsigned char *p = (const unsigned char *)s->p + 1, *end = (const unsigned char *)s->end;
    int esc = 0, hi = 0;
    *body = (const char *)p;
    for (;;) {
        /* the common run: plain printable ASCII, 16 bytes at a time where SSE2 is there */
#if defined(__SSE2__)
        while (end - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            /* signed: bytes >= 0x80 are negative, so one compare finds them and control characters */
            __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                     _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                        _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
            int mask = _mm_movemask_epi8(stop);
            if (mask) {
                p += __builtin_ctz((unsigned)mask);
                break;
            }
            p += 16;
        }
#endif
        while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80) p++;
        if (p >= end) return DECLINE;
        unsigned char c = *p;
        if (c == '"') break;
        if (c >= 0x80) {
            hi = 1;
            p++;
            continue;
        }
        if (c < 0x20) return DECLINE;
        /* a backslash */
        esc = 1;
        if (p + 1 >= end) return DECLINE;
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            break;
        case 'u': {
            if (p + 6 > end) return DECLINE;
            int v = 0;
            for (int i = 2; i < 6; i++) {
                int d = hexval((char)p[i]);
                if (d < 0) return DECLINE;
                v = v * 16 + d;
            }
            if (v >= 0xD800 && v <= 0xDFFF) return DECLINE;
            p += 6;
            break;
        }
        default:
            return DECLINE;
        }
    }
    *body_end = (const char *)p;
    *escaped = esc;
    *high = hi;
    s->p = (const char *)p + 1;
    return OK;
}

static int ensure_scratch(Scanner *s, Py_ssize_t n) {
    if (n <= s->scratch_cap) return OK;
    Py_ssize_t cap = s->scratch_cap ? s->scratch_cap : 256;
    while (cap < n) cap *= 2;
    char *b = realloc(s->scratch, (size_t)cap);
    if (!b) return NOMEM;
    s->scratch = b;
    s->scratch_cap = cap;
    return OK;
}

/* The UTF-8 text of an escaped string body (already checked by scan_string) into the scratch buffer. */
static int unescape(Scanner *s, const char *p, const char *end, Py_ssize_t *out_n) {
    int rc = ensure_scratch(s, end - p);
    if (rc) return rc;
    char *o = s->scratch;
    while (p < end) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        char c = p[1];
        p += 2;
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        default: { /* 'u', four hex digits, not a surrogate: at most 3 bytes, never more than the 6 read */
            int v = hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]);
            p += 4;
            if (v < 0x80) {
                *o++ = (char)v;
            } else if (v < 0x800) {
                *o++ = (char)(0xC0 | (v >> 6));
                *o++ = (char)(0x80 | (v & 0x3F));
            } else {
                *o++ = (char)(0xE0 | (v >> 12));
                *o++ = (char)(0x80 | ((v >> 6) & 0x3F));
                *o++ = (char)(0x80 | (v & 0x3F));
            }
        }
        }
    }
    *out_n = o - s->scratch;
    return OK;
}

/* A string value at s->p, interned into the string table. */
static int string_value(Scanner *s, int32_t *id) {
    const char *b, *e;
    int escaped, high;
    int rc = scan_string(s, &b, &e, &escaped, &high);
    if (rc) return rc;
    if (!escaped) return table_intern(&s->strs, b, e - b, 0, id);
    Py_ssize_t n;
    rc = unescape(s, b, e, &n);
    if (rc) return rc;
    return table_intern(&s->strs, s->scratch, n, 1, id);
}

/* A field the strict schema types as str: a string, interned; anything else declines. */
static int text_value(Scanner *s, int32_t *id) {
    if (s->p >= s->end || *s->p != '"') return DECLINE;
    return string_value(s, id);
}

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

typedef struct {
    int is_int;        /* no fraction, no exponent */
    int exact;         /* is_int: value in ival; else: value in dval, exactly rounded */
    int64_t ival;
    double dval;
    const char *text;  /* the number as written */
    Py_ssize_t len;
} Number;

/* A JSON number at s->p. Integers of up to 18 digits and floats whose digits fit 2^53 with a power
 * of ten up to 22 are converted here (one correctly rounded IEEE operation); others are marked
 * inexact, for the caller to decline or to convert later. */
static int scan_number(Scanner *s, Number *num) {
    const char *p = s->p, *end = s->end;
    int neg = 0;
    num->text = p;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end) return DECLINE;
    uint64_t m = 0;
    int digits = 0;     /* significant digits in m */
    int dropped = 0;    /* significant digits past what m holds */
    int int_digits = 0;
    if (*p == '0') {
        p++;
        int_digits = 1;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            if (digits < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                digits++;
            } else {
                dropped++;
            }
            int_digits++;
            p++;
        }
    } else {
        return DECLINE;
    }
    int frac_digits = 0, is_int = 1;
    if (p < end && *p == '.') {
        is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return DECLINE;
        while (p < end && *p >= '0' && *p <= '9') {
            if (m == 0 && *p == '0') {
                frac_digits++; /* a leading zero: scale only */
            } else if (digits < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                digits++;
                frac_digits++;
            } else {
                dropped++;
            }
            p++;
        }
    }
    int64_t exp10 = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p >= end || *p < '0' || *p > '9') return DECLINE;
        while (p < end && *p >= '0' && *p <= '9') {
            if (exp10 < 100000) exp10 = exp10 * 10 + (*p - '0');
            p++;
        }
        if (eneg) exp10 = -exp10;
    }
    s->p = p;
    num->len = p - num->text;
    num->is_int = is_int;
    num->exact = 0;
    if (is_int) {
        if (int_digits <= MAX_INT_DIGITS) {
            num->ival = neg ? -(int64_t)m : (int64_t)m;
            num->exact = 1;
        }
        return OK;
    }
    if (dropped) return OK;
    int64_t e = exp10 - frac_digits;
    if (m == 0) {
        num->dval = neg ? -0.0 : 0.0;
        num->exact = 1;
    } else if (m <= (1ull << 53) && e >= -22 && e <= 22) {
        double v = (double)m;
        v = e < 0 ? v / POW10[-e] : v * POW10[e];
        num->dval = neg ? -v : v;
        num->exact = 1;
    }
    return OK;
}

/* A number in a skipped value: its grammar checked (as msgspec checks it), its value not read. */
static int skip_number(Scanner *s) {
    const char *p = s->p, *end = s->end;
    if (p < end && *p == '-') p++;
    if (p >= end) return DECLINE;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return DECLINE;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return DECLINE;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return DECLINE;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    s->p = p;
    return OK;
}

static int skip_value(Scanner *s, int depth);
static int key(Scanner *s, const char **k, Py_ssize_t *n);

static int skip_container(Scanner *s, int depth, char close) {
    if (depth >= MAX_DEPTH) return DECLINE;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return OK;
    }
    for (;;) {
        int rc;
        if (close == '}') {
            const char *k;
            Py_ssize_t kn;
            skip_ws(s);
            rc = key(s, &k, &kn);
            if (rc) return rc;
        }
        skip_ws(s);
        rc = skip_value(s, depth + 1);
        if (rc) return rc;
        skip_ws(s);
        if (s->p >= s->end) return DECLINE;
        if (*s->p == ',') {
            s->p++;
            continue;
        }
        if (*s->p == close) {
            s->p++;
            return OK;
        }
        return DECLINE;
    }
}

static int literal(Scanner *s, const char *word, Py_ssize_t n) {
    if (s->end - s->p < n || memcmp(s->p, word, (size_t)n) != 0) return DECLINE;
    s->p += n;
    return OK;
}

static int skip_value(Scanner *s, int depth) {
    if (s->p >= s->end) return DECLINE;
    switch (*s->p) {
    case '"': {
        const char *b, *e;
        int escaped, high;
        return scan_string(s, &b, &e, &escaped, &high);
    }
    case '{': return skip_container(s, depth, '}');
    case '[': return skip_container(s, depth, ']');
    case 't': return literal(s, "true", 4);
    case 'f': return literal(s, "false", 5);
    case 'n': return literal(s, "null", 4);
    default:
        return skip_number(s);
    }
}

/* An int field of the strict schema: a JSON integer within 18 digits, else declined. */
static int int_value(Scanner *s, int64_t *out) {
    if (s->p >= s->end || !(*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))) return DECLINE;
    Number num;
    int rc = scan_number(s, &num);
    if (rc) return rc;
    if (!num.is_int || !num.exact) return DECLINE;
    *out = num.ival;
    return OK;
}

/* A number left for CPython's correctly rounded conversion after the scan (field: SLOW_TS, SLOW_DUR,
 * or SLOW_CHECK_ONLY for a value only checked to be in range). */
static int slow_float(Scanner *s, const Number *num, int field) {
    if (num->len > MAX_SLOW_FLOAT) return DECLINE;
    if (s->nslow == s->slow_cap) {
        Py_ssize_t cap = s->slow_cap ? s->slow_cap * 2 : 1024;
        SlowFloat *b = realloc(s->slow, sizeof(SlowFloat) * (size_t)cap);
        if (!b) return NOMEM;
        s->slow = b;
        s->slow_cap = cap;
    }
    s->slow[s->nslow++] = (SlowFloat){s->current, num->text - s->start, num->len, field};
    return OK;
}

/* A float field (ts, dur): any JSON number; msgspec takes integers too. */
static int float_value(Scanner *s, double *out, int field) {
    if (s->p >= s->end || !(*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))) return DECLINE;
    Number num;
    int rc = scan_number(s, &num);
    if (rc) return rc;
    if (num.is_int) {
        if (!num.exact) return DECLINE;
        *out = (double)num.ival; /* round to nearest, as float(int) does */
        return OK;
    }
    if (num.exact) {
        *out = num.dval;
        return OK;
    }
    *out = 0.0;
    return slow_float(s, &num, field);
}

/* A key at s->p, then the colon: [*k, *k + *n) is its text, unescaped (msgspec matches field names
 * on the decoded text; it does not check the UTF-8 of keys, which match no field name anyway). */
static int key(Scanner *s, const char **k, Py_ssize_t *n) {
    const char *b, *e;
    int escaped, high;
    if (s->p >= s->end || *s->p != '"') return DECLINE;
    int rc = scan_string(s, &b, &e, &escaped, &high);
    if (rc) return rc;
    if (escaped) {
        rc = unescape(s, b, e, n);
        if (rc) return rc;
        b = s->scratch;
        e = b + *n;
    }
    skip_ws(s);
    if (s->p >= s->end || *s->p != ':') return DECLINE;
    s->p++;
    skip_ws(s);
    *k = b;
    *n = e - b;
    return OK;
}

/* Whether [k, k + n) is the literal lit; a byte loop the compiler unrolls (memcmp would be a call). */
static inline int key_is(const char *k, Py_ssize_t n, const char *lit, Py_ssize_t lit_n) {
    if (n != lit_n) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (k[i] != lit[i]) return 0;
    return 1;
}

#define KEY_IS(k, n, lit) key_is((k), (n), (lit), (Py_ssize_t)(sizeof(lit) - 1))

/* The members of an object at s->p: the body runs once per key, with k/kn its text and s->p at its value. */
#define FOR_MEMBERS(s, ...)                                   \
    do {                                                       \
        (s)->p++;                                              \
        skip_ws(s);                                            \
        if ((s)->p < (s)->end && *(s)->p == '}') {             \
            (s)->p++;                                          \
            break;                                             \
        }                                                      \
        for (;;) {                                             \
            const char *k;                                     \
            Py_ssize_t kn;                                     \
            int rc_ = key((s), &k, &kn);                       \
            if (rc_) return rc_;                               \
            __VA_ARGS__                                        \
            skip_ws(s);                                        \
            if ((s)->p >= (s)->end) return DECLINE;            \
            if (*(s)->p == ',') {                              \
                (s)->p++;                                      \
                skip_ws(s);                                    \
                continue;                                      \
            }                                                  \
            if (*(s)->p == '}') {                              \
                (s)->p++;                                      \
                break;                                         \
            }                                                  \
            return DECLINE;                                    \
        }                                                      \
    } while (0)

#define ONCE(bit)                      \
    do {                               \
        if (seen & (bit)) return DECLINE; \
        seen |= (bit);                 \
    } while (0)

/* "grid" / "block": [x, y, z] of JSON integers gives the three values (-1 for one outside [0, 2^31));
 * null reads as absent (-1). Any other value (another length, a float, a string...) is declined and
 * msgspec reads it (kineto._dim3 makes -1s of it): such values are not what Kineto writes. */
static int dim3_value(Scanner *s, int32_t *x, int32_t *y, int32_t *z) {
    if (s->p < s->end && *s->p == 'n') return literal(s, "null", 4);
    if (s->p >= s->end || *s->p != '[') return DECLINE;
    int32_t *out[3] = {x, y, z};
    s->p++;
    for (int i = 0; i < 3; i++) {
        skip_ws(s);
        if (i > 0) {
            if (s->p >= s->end || *s->p != ',') return DECLINE;
            s->p++;
            skip_ws(s);
        }
        int64_t v;
        int rc = int_value(s, &v);
        if (rc) return rc;
        *out[i] = (v >= 0 && v <= INT32_MAX) ? (int32_t)v : -1;
    }
    skip_ws(s);
    if (s->p >= s->end || *s->p != ']') return DECLINE;
    s->p++;
    return OK;
}

/* "registers per thread" / "shared memory": a JSON integer (-1 outside [0, 2^31)); null reads as absent.
 * Any other value is declined and msgspec reads it (kineto.schema._resource makes -1 of it). */
static int resource_value(Scanner *s, int32_t *out) {
    if (s->p < s->end && *s->p == 'n') return literal(s, "null", 4);
    int64_t v;
    int rc = int_value(s, &v);
    if (rc) return rc;
    *out = (v >= 0 && v <= INT32_MAX) ? (int32_t)v : -1;
    return OK;
}

/* Whether string index id is the text lit. */
static int string_is(const Scanner *s, int32_t id, const char *lit) {
    Py_ssize_t n = (Py_ssize_t)strlen(lit);
    return id >= 0 && s->strs.keys[id].n == n && memcmp(s->strs.keys[id].p, lit, (size_t)n) == 0;
}

/* The event just read, if a kernel ("ph": "X", "cat": "kernel" or "Kernel", the loader's kernel rows) whose args
 * say its resources: the largest per name kept in s->res. */
static int note_resources(Scanner *s, const Event *ev) {
    if (s->regs < 0 && s->smem < 0) return OK;
    if (!string_is(s, ev->ph, "X") || !(string_is(s, ev->cat, "kernel") || string_is(s, ev->cat, "Kernel")))
        return OK;
    int32_t *slot = s->nameless;
    if (ev->name >= 0) {
        if (ev->name >= s->res_cap) {
            Py_ssize_t cap = s->res_cap ? s->res_cap : 256;
            while (cap <= ev->name) cap *= 2;
            int32_t *b = realloc(s->res, sizeof(int32_t) * 2 * (size_t)cap);
            if (!b) return NOMEM;
            memset(b + 2 * s->res_cap, 0xFF, sizeof(int32_t) * 2 * (size_t)(cap - s->res_cap));
            s->res = b;
            s->res_cap = cap;
        }
        slot = s->res + 2 * ev->name;
    }
    if (s->regs > slot[0]) slot[0] = s->regs;
    if (s->smem > slot[1]) slot[1] = s->smem;
    return OK;
}

static int args_value(Scanner *s, Event *ev) {
    if (s->p >= s->end || *s->p != '{') return DECLINE; /* null args: not the strict schema */
    unsigned seen = 0;
    int rc;
    FOR_MEMBERS(s, {
        if (KEY_IS(k, kn, "correlation")) {
            ONCE(1);
            rc = int_value(s, &ev->corr);
        } else if (KEY_IS(k, kn, "device")) {
            ONCE(2);
            rc = int_value(s, &ev->device);
        } else if (KEY_IS(k, kn, "stream")) {
            ONCE(4);
            rc = int_value(s, &ev->stream);
        } else if (KEY_IS(k, kn, "graph id")) {
            ONCE(8);
            rc = int_value(s, &ev->graph_id);
        } else if (KEY_IS(k, kn, "kernel")) {
            ONCE(16);
            rc = text_value(s, &ev->kernel);
        } else if (KEY_IS(k, kn, "Input Dims")) {
            ONCE(32);
            const char *v = s->p;
            rc = skip_value(s, 2);
            if (!rc) rc = table_intern(&s->raws, v, s->p - v, 0, &ev->dims);
        } else if (KEY_IS(k, kn, "Call stack")) {
            ONCE(64);
            const char *v = s->p;
            rc = skip_value(s, 2);
            Py_ssize_t n = s->p - v;
            /* what the loader counts as no stack: "", null, [] (kineto.schema._NO_STACK) */
            ev->has_stack = !((n == 2 && (memcmp(v, "\"\"", 2) == 0 || memcmp(v, "[]", 2) == 0)) ||
                              (n == 4 && memcmp(v, "null", 4) == 0));
        } else if (KEY_IS(k, kn, "grid")) {
            ONCE(128);
            rc = dim3_value(s, &ev->grid_x, &ev->grid_y, &ev->grid_z);
        } else if (KEY_IS(k, kn, "block")) {
            ONCE(256);
            rc = dim3_value(s, &ev->block_x, &ev->block_y, &ev->block_z);
        } else if (KEY_IS(k, kn, "registers per thread")) {
            ONCE(512);
            rc = resource_value(s, &s->regs);
        } else if (KEY_IS(k, kn, "shared memory")) {
            ONCE(1024);
            rc = resource_value(s, &s->smem);
        } else {
            rc = skip_value(s, 2);
        }
        if (rc) return rc;
    });
    return OK;
}

/* pid/tid: an int or a string (msgspec's Union[int, str]). */
static int host_value(Scanner *s, int64_t *value, int32_t *str) {
    if (s->p < s->end && *s->p == '"') return string_value(s, str);
    *str = -1;
    return int_value(s, value);
}

static int event_value(Scanner *s, Event *ev) {
    if (s->p >= s->end || *s->p != '{') return DECLINE;
    unsigned seen = 0;
    int rc;
    FOR_MEMBERS(s, {
        if (KEY_IS(k, kn, "ph")) {
            ONCE(1);
            rc = text_value(s, &ev->ph);
        } else if (KEY_IS(k, kn, "cat")) {
            ONCE(2);
            rc = text_value(s, &ev->cat);
        } else if (KEY_IS(k, kn, "name")) {
            ONCE(4);
            rc = text_value(s, &ev->name);
        } else if (KEY_IS(k, kn, "pid")) {
            ONCE(8);
            rc = host_value(s, &ev->pid, &ev->pid_str);
        } else if (KEY_IS(k, kn, "tid")) {
            ONCE(16);
            rc = host_value(s, &ev->tid, &ev->tid_str);
        } else if (KEY_IS(k, kn, "ts")) {
            ONCE(32);
            rc = float_value(s, &ev->ts, SLOW_TS);
        } else if (KEY_IS(k, kn, "dur")) {
            ONCE(64);
            rc = float_value(s, &ev->dur, SLOW_DUR);
        } else if (KEY_IS(k, kn, "id")) {
            ONCE(128);
            /* an int, float, str or null (kineto._Scalar); anything else: not the strict schema */
            if (s->p >= s->end || *s->p == '{' || *s->p == '[') return DECLINE;
            if (*s->p == 'n') {
                rc = literal(s, "null", 4);
                ev->id_kind = 0;
            } else if (*s->p == '-' || (*s->p >= '0' && *s->p <= '9')) {
                Number num;
                rc = scan_number(s, &num);
                if (rc) return rc;
                if (num.is_int && num.exact) {
                    ev->id = num.ival;
                    ev->id_kind = 1;
                } else {
                    ev->id_kind = 2;
                    /* msgspec converts a float id and refuses one out of range: checked afterwards */
                    if (!num.is_int && !num.exact) rc = slow_float(s, &num, SLOW_CHECK_ONLY);
                }
            } else if (*s->p == '"') {
                int32_t text; /* decoded by msgspec, so its UTF-8 is checked: interned to be checked too */
                rc = string_value(s, &text);
                ev->id_kind = 2;
            } else {
                return DECLINE; /* true/false: the strict schema's id is an int, float, str or null */
            }
        } else if (KEY_IS(k, kn, "args")) {
            ONCE(256);
            rc = args_value(s, ev);
        } else {
            rc = skip_value(s, 1);
        }
        if (rc) return rc;
    });
    return OK;
}

static const Event EMPTY_EVENT = {
    .ts = NAN, .dur = 0.0, .pid = 0, .tid = 0, .corr = -1, .device = -1, .stream = -1, .graph_id = -1, .id = 0,
    .ph = -1, .cat = -1, .name = -1, .kernel = -1, .dims = -1, .pid_str = -2, .tid_str = -2,
    .grid_x = -1, .grid_y = -1, .grid_z = -1, .block_x = -1, .block_y = -1, .block_z = -1, .id_kind = 0, .has_stack = 0,
};

/* The whole text: "[" (event ("," event)*)? "]", whitespace around any of it. */
static int scan_events(Scanner *s, Event **events, Py_ssize_t *n_events, Py_ssize_t max_events) {
    Py_ssize_t n = 0, cap = 0;
    Event *ev = NULL;
    int rc = OK;
    skip_ws(s);
    if (s->p >= s->end || *s->p != '[') return DECLINE;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
    } else {
        for (;;) {
            if (n >= max_events) {
                rc = DECLINE;
                break;
            }
            if (n == cap) {
                /* first guess: Kineto's events take 200 bytes or more */
                cap = cap ? cap * 2 : (s->end - s->start) / 200 + 64;
                Event *b = realloc(ev, sizeof(Event) * (size_t)cap);
                if (!b) {
                    rc = NOMEM;
                    break;
                }
                ev = b;
            }
            ev[n] = EMPTY_EVENT;
            s->current = n;
            s->regs = s->smem = -1;
            rc = event_value(s, &ev[n]);
            if (!rc) rc = note_resources(s, &ev[n]);
            if (rc) break;
            n++;
            skip_ws(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                skip_ws(s);
                continue;
            }
            if (s->p < s->end && *s->p == ']') {
                s->p++;
                break;
            }
            rc = DECLINE;
            break;
        }
    }
    if (!rc) {
        skip_ws(s);
        if (s->p != s->end) rc = DECLINE;
    }
    *events = ev;
    *n_events = n;
    return rc;
}

static PyObject *strings_of(Table *t) {
    PyObject *list = PyList_New(t->count);
    if (!list) return NULL;
    for (Py_ssize_t i = 0; i < t->count; i++) {
        PyObject *u = PyUnicode_DecodeUTF8(t->keys[i].p, t->keys[i].n, "strict");
        if (!u) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, u);
    }
    return list;
}

static PyObject *raws_of(Table *t) {
    PyObject *list = PyList_New(t->count);
    if (!list) return NULL;
    for (Py_ssize_t i = 0; i < t->count; i++) {
        PyObject *b = PyBytes_FromStringAndSize(t->keys[i].p, t->keys[i].n);
        if (!b) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, b);
    }
    return list;
}

/* The kernels' resources: (string index, registers, shared memory) int32 triples, names in string order, the
 * kernels without a name (index -1) last. */
static PyObject *resources_of(const Scanner *s) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i <= s->res_cap; i++) {
        const int32_t *r = i < s->res_cap ? s->res + 2 * i : s->nameless;
        n += r[0] >= 0 || r[1] >= 0;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int32_t) * 3 * n);
    if (!out) return NULL;
    int32_t *o = (int32_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i <= s->res_cap; i++) {
        const int32_t *r = i < s->res_cap ? s->res + 2 * i : s->nameless;
        if (r[0] < 0 && r[1] < 0) continue;
        *o++ = i < s->res_cap ? (int32_t)i : -1;
        *o++ = r[0];
        *o++ = r[1];
    }
    return out;
}

/* The floats left for CPython's correctly rounded conversion; 0 or DECLINE. */
static int convert_slow_floats(Scanner *s, Event *ev) {
    char buf[MAX_SLOW_FLOAT + 1];
    for (Py_ssize_t i = 0; i < s->nslow; i++) {
        SlowFloat *f = &s->slow[i];
        memcpy(buf, s->start + f->offset, (size_t)f->length);
        buf[f->length] = '\0';
        char *stop = NULL;
        double v = PyOS_string_to_double(buf, &stop, NULL);
        if (v == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return DECLINE;
        }
        if (stop != buf + f->length || !isfinite(v)) return DECLINE; /* msgspec: "Number out of range" */
        if (v == 0.0) return DECLINE; /* an underflow (a zero would have been exact): leave it to msgspec */
        if (f->field == SLOW_TS)
            ev[f->event].ts = v;
        else if (f->field == SLOW_DUR)
            ev[f->event].dur = v;
    }
    return OK;
}

static PyObject *scan(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer view;
    Py_ssize_t max_events;
    if (!PyArg_ParseTuple(args, "y*n:scan", &view, &max_events)) return NULL;
    Scanner s;
    memset(&s, 0, sizeof(s));
    s.nameless[0] = s.nameless[1] = -1;
    s.start = s.p = view.buf;
    s.end = s.start + view.len;
    Event *events = NULL;
    Py_ssize_t n = 0;
    PyObject *result = NULL;
    int rc = table_init(&s.strs);
    if (!rc) rc = table_init(&s.raws);
    if (!rc) {
        Py_BEGIN_ALLOW_THREADS
        rc = scan_events(&s, &events, &n, max_events);
        Py_END_ALLOW_THREADS
    }
    if (!rc) rc = convert_slow_floats(&s, events);
    if (rc == NOMEM) {
        PyErr_NoMemory();
    } else if (rc == DECLINE) {
        result = Py_NewRef(Py_None);
    } else {
        PyObject *records = PyBytes_FromStringAndSize((const char *)events, (Py_ssize_t)sizeof(Event) * n);
        PyObject *strings = records ? strings_of(&s.strs) : NULL;
        if (!strings && records && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear(); /* invalid UTF-8 in a string value: msgspec says so */
            result = Py_NewRef(Py_None);
        } else {
            PyObject *raws = strings ? raws_of(&s.raws) : NULL;
            PyObject *resources = raws ? resources_of(&s) : NULL;
            if (resources) result = PyTuple_Pack(4, records, strings, raws, resources);
            Py_XDECREF(resources);
            Py_XDECREF(raws);
        }
        Py_XDECREF(strings);
        Py_XDECREF(records);
    }
    free(events);
    free(s.scratch);
    free(s.slow);
    free(s.res);
    table_free(&s.strs);
    table_free(&s.raws);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(text, max_events) -> (records, strings, raws, resources) | None: a Kineto event array's columns, or None "
     "where the text is not certain to read exactly as msgspec's strict schema reads it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, methods, NULL, NULL, NULL, NULL};

static const struct {
    const char *name;
    Py_ssize_t offset;
    const char *code;
} FIELDS[] = {
#define FIELD(f, code) {#f, offsetof(Event, f), code}
    FIELD(ts, "f8"),     FIELD(dur, "f8"),     FIELD(pid, "i8"),      FIELD(tid, "i8"),     FIELD(corr, "i8"),
    FIELD(device, "i8"), FIELD(stream, "i8"),  FIELD(graph_id, "i8"), FIELD(id, "i8"),      FIELD(ph, "i4"),
    FIELD(cat, "i4"),    FIELD(name, "i4"),    FIELD(kernel, "i4"),   FIELD(dims, "i4"),    FIELD(pid_str, "i4"),
    FIELD(tid_str, "i4"), FIELD(grid_x, "i4"), FIELD(grid_y, "i4"), FIELD(grid_z, "i4"), FIELD(block_x, "i4"),
    FIELD(block_y, "i4"), FIELD(block_z, "i4"), FIELD(id_kind, "i1"), FIELD(has_stack, "i1"),
#undef FIELD
};

PyMODINIT_FUNC PyInit__scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_ssize_t n = (Py_ssize_t)(sizeof(FIELDS) / sizeof(FIELDS[0]));
    PyObject *fields = PyTuple_New(n);
    for (Py_ssize_t i = 0; fields && i < n; i++) {
        PyObject *f = Py_BuildValue("(sns)", FIELDS[i].name, FIELDS[i].offset, FIELDS[i].code);
        if (!f) {
            Py_CLEAR(fields);
            break;
        }
        PyTuple_SET_ITEM(fields, i, f);
    }
    if (!fields || PyModule_AddObject(m, "EVENT_FIELDS", fields) < 0 ||
        PyModule_AddIntConstant(m, "EVENT_SIZE", (long)sizeof(Event)) < 0 ||
        PyModule_AddIntConstant(m, "KERNEL_RESOURCES", 1) < 0) {
        Py_XDECREF(fields);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
