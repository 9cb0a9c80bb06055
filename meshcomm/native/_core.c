/* meshcomm's compiled hot path: one board call from post to result, and the system calls under it.
 *
 * The board's layout and protocol are meshcomm/board/segment.py's; this file runs the same steps for the board
 * calls docs/native.md lists. The rest (a pushed gather, a dtype or op not served here) stays on the Python path,
 * which shares this object's turn counters. A Lane runs a face's repeated call of one shape from the face's
 * arguments to the result (meshcomm/group/lanes.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "arrays.h"
#include "blocks.h"
#include "fronts.h"
#include "group_calls.h"
#include "records.h"
#include "rings.h"

#define PAGE 4096
#define LINE 64
#define HEADER 64
#define SLEEP_SLICE 0.01 /* a sleeper looks at liveness, abort and its deadline this often */
#define SPIN_CHECK 64    /* polls between looks at the clock while spinning */

/* ---------------------------------------------------------------- clocks and system calls */

static int futex_sleep(uint32_t *word, uint32_t expected, double timeout) {
    struct timespec ts;
    if (timeout < 0) timeout = 0;
    ts.tv_sec = (time_t)timeout;
    ts.tv_nsec = (long)((timeout - (double)ts.tv_sec) * 1e9);
    if (syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, NULL, 0) == -1 && errno != EAGAIN &&
        errno != ETIMEDOUT && errno != EINTR)
        return errno;
    return 0;
}

/* OSError(code, message), as the Python path raises it: its errno is set. */
static PyObject *os_error(int code, PyObject *message) {
    PyObject *arguments = message ? Py_BuildValue("(iN)", code, message) : NULL;
    if (arguments) {
        PyErr_SetObject(PyExc_OSError, arguments);
        Py_DECREF(arguments);
    }
    return NULL;
}

static PyObject *py_futex_wait(PyObject *self, PyObject *args) {
    unsigned long long address;
    unsigned int expected;
    double timeout;
    int code;
    if (!PyArg_ParseTuple(args, "KId", &address, &expected, &timeout)) return NULL;
    Py_BEGIN_ALLOW_THREADS code = futex_sleep((uint32_t *)(uintptr_t)address, expected, timeout);
    Py_END_ALLOW_THREADS if (code) return os_error(code, PyUnicode_FromFormat("futex wait failed: %s", strerror(code)));
    Py_RETURN_NONE;
}

static PyObject *py_futex_wake(PyObject *self, PyObject *arg) {
    unsigned long long address = PyLong_AsUnsignedLongLong(arg);
    if (address == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    futex_wake_all((uint32_t *)(uintptr_t)address);
    Py_RETURN_NONE;
}

/* process_vm_readv / writev of `total` bytes, the GIL held or not: partial moves continue, EINTR retries. 0, an
 * errno, or -1 when the kernel moved nothing; *done says how far it got. */
static int vm_copy(int pid, char *local, uint64_t address, Py_ssize_t total, int writing, Py_ssize_t *done) {
    *done = 0;
    while (*done < total) {
        struct iovec mine = {local + *done, (size_t)(total - *done)};
        struct iovec theirs = {(void *)(uintptr_t)(address + *done), (size_t)(total - *done)};
        ssize_t got = writing ? process_vm_writev(pid, &mine, 1, &theirs, 1, 0)
                              : process_vm_readv(pid, &mine, 1, &theirs, 1, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (got == 0) return -1;
        *done += got;
    }
    return 0;
}

/* process_vm_readv / writev of a whole buffer; OSError names the peer. */
static PyObject *vm_move(PyObject *args, int writing) {
    int pid;
    unsigned long long address;
    Py_buffer local;
    if (!PyArg_ParseTuple(args, writing ? "iKy*" : "iKw*", &pid, &address, &local)) return NULL;
    Py_ssize_t done;
    int code;
    Py_BEGIN_ALLOW_THREADS code = vm_copy(pid, local.buf, address, local.len, writing, &done);
    Py_END_ALLOW_THREADS PyBuffer_Release(&local);
    const char *what = writing ? "process_vm_writev to" : "process_vm_readv from";
    if (code == -1)
        return os_error(EFAULT, PyUnicode_FromFormat("%s process %d moved nothing at %#llx", what, pid,
                                                     address + done));
    if (code) return os_error(code, PyUnicode_FromFormat("%s process %d: %s", what, pid, strerror(code)));
    Py_RETURN_NONE;
}

static PyObject *py_vm_read(PyObject *self, PyObject *args) { return vm_move(args, 0); }
static PyObject *py_vm_write(PyObject *self, PyObject *args) { return vm_move(args, 1); }

/* ---------------------------------------------------------------- reductions */

enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_BAND, OP_BOR, OP_BXOR };
enum { T_I8, T_I16, T_I32, T_I64, T_U8, T_U16, T_U32, T_U64, T_F32, T_F64, T_F16, T_BF16, T_BOOL };

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF, bits;
    if (exponent == 0x1F) {
        bits = sign | 0x7F800000 | (mantissa << 13);
    } else if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int shift = 0;
            while (!(mantissa & 0x400)) {
                mantissa <<= 1;
                shift++;
            }
            bits = sign | ((uint32_t)(113 - shift) << 23) | ((mantissa & 0x3FF) << 13);
        }
    } else {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* float -> half, nearest with ties to even, as numpy's npy_floatbits_to_halfbits. */
static uint16_t float_to_half(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint16_t sign = (uint16_t)((bits & 0x80000000u) >> 16);
    uint32_t fexp = bits & 0x7F800000u, fsig;
    if (fexp >= 0x47800000u) { /* overflow, inf or nan */
        if (fexp == 0x7F800000u) {
            fsig = bits & 0x007FFFFFu;
            if (fsig != 0) {
                uint16_t ret = (uint16_t)(0x7C00u + (fsig >> 13));
                if (ret == 0x7C00u) ret++; /* a NaN stays a NaN */
                return sign + ret;
            }
            return (uint16_t)(sign + 0x7C00u);
        }
        return (uint16_t)(sign + 0x7C00u);
    }
    if (fexp <= 0x38000000u) { /* subnormal half, or zero */
        if (fexp < 0x33000000u) return sign;
        fexp >>= 23;
        fsig = 0x00800000u + (bits & 0x007FFFFFu);
        fsig >>= (113 - fexp);
        /* ties to even; the shift may have dropped bits, which the original's low bits still show */
        if ((fsig & 0x00003FFFu) != 0x00001000u || (bits & 0x000007FFu)) fsig += 0x00001000u;
        return (uint16_t)(sign + (fsig >> 13));
    }
    uint16_t hexp = (uint16_t)((fexp - 0x38000000u) >> 13);
    fsig = bits & 0x007FFFFFu;
    if ((fsig & 0x00003FFFu) != 0x00001000u) fsig += 0x00001000u;
    uint16_t hsig = (uint16_t)(fsig >> 13);
    return (uint16_t)(sign + (uint16_t)(hsig + hexp)); /* a carry into the exponent rounds up, to inf at most */
}

static float bf16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* as narrow_floats._bf16_narrow: nearest, ties to even; every NaN becomes 0x7FC0 */
static uint16_t float_to_bf16(float f) {
    if (isnan(f)) return 0x7FC0;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    bits += 0x7FFF + ((bits >> 16) & 1);
    return (uint16_t)(bits >> 16);
}

/* numpy's minimum and maximum: a NaN on either side wins, the left one first. Of two equal values of different
 * signs (-0.0 and 0.0), and of two NaNs in a sum or a product, which one numpy returns depends on whether the
 * element falls in its vector loop or its scalar one, so on the array's length and the element's place: a chunk
 * holding such a pair is "unsure", and the call is computed again by numpy (Python) instead. */
#define MIN_OF(a, b) (((a) <= (b) || isnan(a)) ? (a) : (b))
#define MAX_OF(a, b) (((a) >= (b) || isnan(a)) ? (a) : (b))
#define NAN_PAIR(a, b) (isnan(a) & isnan(b))
#define SIGNED_ZEROS(a, b) (((a) == (b)) & (signbit(a) != signbit(b)))
#define CHUNK 512 /* elements checked, then combined, at a time: both stay in the core's cache */

/* Whether numpy's bits are uncertain for dst op src somewhere in n elements: the 16-bit floats' check in combine,
 * and a caller's whose dst must stay whole when they are. bfloat16's NaNs all become one (narrow_floats), so only its
 * signed zeros are unsure. Flags are or-ed over a chunk without a branch, so that the compiler vectorises the look. */
#define UNSURE_LOOP(T, GET, NANS_UNSURE)                                                \
    {                                                                                   \
        const T *d = dst, *s = src;                                                     \
        for (Py_ssize_t lo = 0; lo < n; lo += CHUNK) {                                  \
            Py_ssize_t hi = lo + CHUNK < n ? lo + CHUNK : n;                            \
            int found = 0;                                                              \
            if (sums)                                                                   \
                for (Py_ssize_t i = lo; i < hi; i++) found |= NANS_UNSURE && NAN_PAIR(GET(d[i]), GET(s[i])); \
            else                                                                        \
                for (Py_ssize_t i = lo; i < hi; i++) found |= SIGNED_ZEROS(GET(d[i]), GET(s[i])); \
            if (found) return 1;                                                        \
        }                                                                               \
        return 0;                                                                       \
    }
#define AS_IS(x) (x)

static int unsure(int type, int op, const void *dst, const void *src, Py_ssize_t n) {
    int sums = op == OP_SUM || op == OP_PROD;
    switch (type) {
    case T_F32: UNSURE_LOOP(float, AS_IS, 1)
    case T_F64: UNSURE_LOOP(double, AS_IS, 1)
    case T_F16: UNSURE_LOOP(uint16_t, half_to_float, 1)
    case T_BF16: UNSURE_LOOP(uint16_t, bf16_to_float, 0)
    }
    return 0;
}

/* Integers wrap around: products are taken in an unsigned type wide enough not to promote to int. */
#define INT_LOOP(T, W)                                                                  \
    {                                                                                   \
        T *d = (T *)dst;                                                                \
        const T *s = (const T *)src;                                                    \
        switch (op) {                                                                   \
        case OP_SUM: for (i = 0; i < n; i++) d[i] = (T)((W)d[i] + (W)s[i]); break;      \
        case OP_PROD: for (i = 0; i < n; i++) d[i] = (T)((W)d[i] * (W)s[i]); break;     \
        case OP_MIN: for (i = 0; i < n; i++) d[i] = d[i] <= s[i] ? d[i] : s[i]; break;  \
        case OP_MAX: for (i = 0; i < n; i++) d[i] = d[i] >= s[i] ? d[i] : s[i]; break;  \
        case OP_BAND: for (i = 0; i < n; i++) d[i] = d[i] & s[i]; break;                \
        case OP_BOR: for (i = 0; i < n; i++) d[i] = d[i] | s[i]; break;                 \
        case OP_BXOR: for (i = 0; i < n; i++) d[i] = d[i] ^ s[i]; break;                \
        }                                                                               \
        return 0;                                                                       \
    }

#define FLOAT_LOOP(T)                                                                   \
    {                                                                                   \
        T *d = (T *)dst;                                                                \
        const T *s = (const T *)src;                                                    \
        for (Py_ssize_t lo = 0; lo < n; lo += CHUNK) {                                  \
            Py_ssize_t hi = lo + CHUNK < n ? lo + CHUNK : n;                            \
            int found = 0; /* unsure()'s look, kept inline: through the call, reductions measured slower */ \
            if (op == OP_SUM || op == OP_PROD)                                          \
                for (i = lo; i < hi; i++) found |= NAN_PAIR(d[i], s[i]);                \
            else                                                                        \
                for (i = lo; i < hi; i++) found |= SIGNED_ZEROS(d[i], s[i]);            \
            if (found) return 1;                                                        \
            switch (op) {                                                               \
            case OP_SUM: for (i = lo; i < hi; i++) d[i] = d[i] + s[i]; break;           \
            case OP_PROD: for (i = lo; i < hi; i++) d[i] = d[i] * s[i]; break;          \
            case OP_MIN: for (i = lo; i < hi; i++) d[i] = MIN_OF(d[i], s[i]); break;    \
            case OP_MAX: for (i = lo; i < hi; i++) d[i] = MAX_OF(d[i], s[i]); break;    \
            }                                                                           \
        }                                                                               \
        return 0;                                                                       \
    }

/* 16-bit floats: widened to float32, combined, rounded back after each step, as the Python path does. */
#define NARROW_LOOP(WIDEN, NARROW)                                                      \
    {                                                                                   \
        uint16_t *d = (uint16_t *)dst;                                                  \
        const uint16_t *s = (const uint16_t *)src;                                      \
        if (unsure(type, op, dst, src, n)) return 1;                                    \
        for (i = 0; i < n; i++) {                                                       \
            float a = WIDEN(d[i]), b = WIDEN(s[i]), r = 0;                              \
            switch (op) {                                                               \
            case OP_SUM: r = a + b; break;                                              \
            case OP_PROD: r = a * b; break;                                             \
            case OP_MIN: r = MIN_OF(a, b); break;                                       \
            case OP_MAX: r = MAX_OF(a, b); break;                                       \
            }                                                                           \
            d[i] = NARROW(r);                                                           \
        }                                                                               \
        return 0;                                                                       \
    }

/* dst = dst op src, element by element; 1 (nothing promised of dst) when numpy's result is not certain here. */
static int combine(int type, int op, void *dst, const void *src, Py_ssize_t n) {
    Py_ssize_t i;
    switch (type) {
    case T_I8: INT_LOOP(int8_t, uint32_t)
    case T_I16: INT_LOOP(int16_t, uint32_t)
    case T_I32: INT_LOOP(int32_t, uint32_t)
    case T_I64: INT_LOOP(int64_t, uint64_t)
    case T_U8: INT_LOOP(uint8_t, uint32_t)
    case T_U16: INT_LOOP(uint16_t, uint32_t)
    case T_U32: INT_LOOP(uint32_t, uint32_t)
    case T_U64: INT_LOOP(uint64_t, uint64_t)
    case T_F32: FLOAT_LOOP(float)
    case T_F64: FLOAT_LOOP(double)
    case T_F16: NARROW_LOOP(half_to_float, float_to_half)
    case T_BF16: NARROW_LOOP(bf16_to_float, float_to_bf16)
    case T_BOOL: {
        uint8_t *d = (uint8_t *)dst;
        const uint8_t *s = (const uint8_t *)src;
        /* numpy's logical ops leave 0 or 1 */
        switch (op) {
        case OP_SUM: case OP_MAX: case OP_BOR: for (i = 0; i < n; i++) d[i] = d[i] || s[i]; break;
        case OP_PROD: case OP_MIN: case OP_BAND: for (i = 0; i < n; i++) d[i] = d[i] && s[i]; break;
        case OP_BXOR: for (i = 0; i < n; i++) d[i] = (!d[i]) != (!s[i]); break;
        }
        return 0;
    }
    }
    return 1;
}

/* ---------------------------------------------------------------- a call's plan */

/* What a rank derives once from a problem (board/run.py's Plan, for the calls this file runs). */
typedef struct {
    PyObject_HEAD int me, nmembers;
    int reducing;           /* combines posts in rank order over elements [lo, hi) */
    Py_ssize_t lo, hi;      /* elements of each post reduced (reducing) */
    Py_ssize_t published;   /* elements this rank writes into its slot */
    Py_ssize_t own_lo, own_hi; /* its input's block left out of its slot; own_lo < 0: none */
    int nread, *read;       /* members whose slots it reads */
    int nreaders, *readers; /* members that read its post */
    int some_by_reference;  /* some member's post is larger than a slot: it goes by reference */
    int by_reference;       /* this rank's post goes by reference (board/run.py's slot_post_bytes) */
    int writes;             /* the two-shot all-reduce: all post by reference, and write into each other's outputs */
    int long_copies;        /* by reference, with buffers above YIELDING_COPY_BYTES (board/run.py): waits never yield */
    Py_ssize_t stage_from;  /* its smallest post by reference staged, or -1: none (board/run.py's staged_from) */
    Py_ssize_t defer_to;    /* its largest staged post deferred, or 0 (board/run.py's defers_to) */
    int stages_two_shot;    /* the two-shot all-reduce through the staging areas: its input staged less its block
                             * [lo, hi), which it reduces into its area (board/run.py's stages_two_shot) */
    Py_ssize_t *own_blocks; /* each member's [lo, hi) left out of its slot (2 per member), or NULL */
    int npieces;            /* copies: member, start in its post, count, where in the output */
    Py_ssize_t *pieces;
    int computes;           /* writes an output */
    int type, op, itemsize;
    unsigned char fingerprint[16];
} PlanObject;

static void plan_dealloc(PlanObject *self) {
    PyMem_Free(self->read);
    PyMem_Free(self->readers);
    PyMem_Free(self->own_blocks);
    PyMem_Free(self->pieces);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t *ssize_array(PyObject *sequence, Py_ssize_t *length, const char *what) {
    PyObject *fast = PySequence_Fast(sequence, what);
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    Py_ssize_t *out = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    if (!out) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(out);
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);
    *length = n;
    return out;
}

/* The members of `sequence` as ints, each another member than `me`; NULL with an error set. */
static int *other_members(PyObject *sequence, int me, int nmembers, int *count, const char *what) {
    Py_ssize_t length;
    Py_ssize_t *members = ssize_array(sequence, &length, what);
    if (!members) return NULL;
    int *out = PyMem_Calloc(length ? length : 1, sizeof(int));
    if (!out) {
        PyMem_Free(members);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < length; i++) {
        if (members[i] < 0 || members[i] >= nmembers || members[i] == me) {
            PyMem_Free(members);
            PyMem_Free(out);
            PyErr_Format(PyExc_ValueError, "a plan's %s are members other than itself", what);
            return NULL;
        }
        out[i] = (int)members[i];
    }
    PyMem_Free(members);
    *count = (int)length;
    return out;
}

/* Plan(me, nmembers, reducing, lo, hi, published, own_lo, own_hi, read, readers, own_blocks, pieces, computes,
 *      some_by_reference, by_reference, writes, long_copies, stage_from, defer_to, type, op, itemsize,
 *      fingerprint): sequences
 *      flat (own_blocks: 2 per member or empty; pieces: 4 per piece). */
static int plan_init(PlanObject *self, PyObject *args, PyObject *kwds) {
    PyObject *read, *readers, *own_blocks, *pieces;
    Py_buffer fingerprint;
    Py_ssize_t length;
    if (self->read != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Plan is made once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "iipnnnnnOOOOpppppnnpiiiy*", &self->me, &self->nmembers, &self->reducing,
                          &self->lo, &self->hi, &self->published, &self->own_lo, &self->own_hi, &read, &readers,
                          &own_blocks, &pieces, &self->computes, &self->some_by_reference, &self->by_reference,
                          &self->writes, &self->long_copies, &self->stage_from, &self->defer_to,
                          &self->stages_two_shot, &self->type,
                          &self->op, &self->itemsize, &fingerprint))
        return -1;
    if (fingerprint.len != 16) {
        PyBuffer_Release(&fingerprint);
        PyErr_SetString(PyExc_ValueError, "a fingerprint has 16 bytes");
        return -1;
    }
    memcpy(self->fingerprint, fingerprint.buf, 16);
    PyBuffer_Release(&fingerprint);
    if (self->nmembers < 2 || self->me < 0 || self->me >= self->nmembers || self->itemsize < 1 || self->lo < 0 ||
        self->hi < self->lo || self->published < 0 || (self->own_lo >= 0 && self->own_hi < self->own_lo)) {
        PyErr_SetString(PyExc_ValueError, "the plan's bounds are not those of a board call");
        return -1;
    }
    if ((self->by_reference && !self->some_by_reference) || (self->writes && !self->by_reference)) {
        PyErr_SetString(PyExc_ValueError, "a post by reference is one of a plan with some by reference");
        return -1;
    }
    if (self->writes && !(self->reducing && self->some_by_reference && self->own_lo < 0)) {
        PyErr_SetString(PyExc_ValueError, "a two-shot plan reduces posts by reference, with no block left out");
        return -1;
    }
    if (self->stages_two_shot && !(self->reducing && self->by_reference && !self->writes && self->own_lo == self->lo &&
                                   self->own_hi == self->hi && self->stage_from == 0 && self->defer_to == 0)) {
        PyErr_SetString(PyExc_ValueError, "a staged two-shot plan stages its input less the block it reduces");
        return -1;
    }
    if (!(self->read = other_members(read, self->me, self->nmembers, &self->nread, "read"))) return -1;
    if (!(self->readers = other_members(readers, self->me, self->nmembers, &self->nreaders, "readers"))) return -1;
    self->own_blocks = ssize_array(own_blocks, &length, "own_blocks");
    if (!self->own_blocks) return -1;
    if (length == 0) {
        PyMem_Free(self->own_blocks);
        self->own_blocks = NULL;
    } else if (length != 2 * self->nmembers) {
        PyErr_SetString(PyExc_ValueError, "own_blocks needs two bounds per member");
        return -1;
    }
    if (self->stages_two_shot && !self->own_blocks) { /* reduce_staged copies each member's block out */
        PyErr_SetString(PyExc_ValueError, "a staged two-shot plan needs every member's block");
        return -1;
    }
    self->pieces = ssize_array(pieces, &length, "pieces");
    if (!self->pieces) return -1;
    self->npieces = (int)(length / 4);
    for (int i = 0; i < self->npieces; i++) {
        Py_ssize_t *piece = self->pieces + 4 * i;
        if (length % 4 || piece[0] < 0 || piece[0] >= self->nmembers || piece[1] < 0 || piece[2] < 0 || piece[3] < 0) {
            PyErr_SetString(PyExc_ValueError, "a piece is (member, start, count, at), each in range");
            return -1;
        }
    }
    return 0;
}

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "meshcomm.native._core.Plan",
    .tp_basicsize = sizeof(PlanObject),
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One rank's plan for board calls of one problem, dtype and op (board/run.py's native_plan).",
    .tp_init = (initproc)plan_init,
    .tp_new = PyType_GenericNew,
};

/* ---------------------------------------------------------------- the board */

typedef struct {
    PyObject_HEAD Py_buffer map;
    int mapped;
    char *base;
    int nmembers, slots;
    Py_ssize_t slot_bytes;
    Py_ssize_t stage_bytes; /* each member's staging area, after the slots: a post by reference of its plan's
                             * stage_from to stage_bytes is copied there, and its readers copy it out (segment.py) */
    uint64_t posts;  /* this member's board calls so far */
    int current;     /* the slot of its latest board call */
    uint64_t *recent; /* the sequence numbers of its last slots - 1 board calls, a ring */
    double yield_seconds;
    int yielding;
    int crowded; /* more ranks than cores on the host: a poster by reference does not spin through its readers' copy */
    int long_copies; /* the running call's plan's: a yielding waiter would take the cores its copiers need */
    char *scratch; /* an output computed aside */
    Py_ssize_t scratch_bytes;
    int running; /* calls in run(), which hold the mapping; release() waits for them (closing) */
    int closing;
} BoardObject;

static inline uint32_t *bell_of(BoardObject *b, int m) { return (uint32_t *)(b->base + m * LINE); }
static inline uint32_t *sleeping_of(BoardObject *b, int m) { return (uint32_t *)(b->base + m * LINE + 4); }
static inline uint64_t *latest_of(BoardObject *b, int m) { return (uint64_t *)(b->base + m * LINE + 8); }
static inline uint64_t *finished_of(BoardObject *b, int m) { return (uint64_t *)(b->base + m * LINE + 16); }
/* seq + 1 of the staged two-shot call whose block of results this member last put in its area (segment.py's) */
static inline uint64_t *results_of(BoardObject *b, int m) { return (uint64_t *)(b->base + m * LINE + 24); }
/* seq + 1 of the call this member last staged in each half of its area without waiting for its readers (0: none);
 * segment.py's _deferred */
static inline uint64_t *deferred_of(BoardObject *b, int m) { return (uint64_t *)(b->base + m * LINE + 32); }
static inline char *slot_of(BoardObject *b, int m, int s) {
    return b->base + PAGE + ((Py_ssize_t)m * b->slots + s) * (HEADER + b->slot_bytes);
}
static inline char *stage_of(BoardObject *b, int m) {
    return slot_of(b, b->nmembers, 0) + (Py_ssize_t)m * b->stage_bytes;
}
static inline uint64_t load(uint64_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

/* The member's slot holding call `seq`, or -1 (segment.Board._slot). */
static int find_slot(BoardObject *b, int member, uint64_t seq) {
    if (load((uint64_t *)slot_of(b, member, b->current)) == seq + 1) return b->current;
    if (load(latest_of(b, member)) <= seq) return -1;
    for (int s = 0; s < b->slots; s++)
        if (load((uint64_t *)slot_of(b, member, s)) == seq + 1) return s;
    return -1;
}

static void board_dealloc(BoardObject *self) {
    if (self->mapped) PyBuffer_Release(&self->map);
    PyMem_Free(self->recent);
    PyMem_Free(self->scratch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Board(mapping, nmembers, slot_bytes, slots, stage_bytes): holds a view of the board file's mapping
 * until release(). */
static int board_init(BoardObject *self, PyObject *args, PyObject *kwds) {
    PyObject *mapping;
    if (self->mapped || self->recent != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Board is made once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "Oinin", &mapping, &self->nmembers, &self->slot_bytes, &self->slots,
                          &self->stage_bytes))
        return -1;
    if (self->stage_bytes < 0) {
        PyErr_Format(PyExc_ValueError, "a board's staging area cannot be negative, got %zd bytes", self->stage_bytes);
        return -1;
    }
    if (self->slots < 2 || self->nmembers < 2 || self->slot_bytes < 0) {
        PyErr_Format(PyExc_ValueError, "a board needs 2 members and 2 slots per member at least, got %d and %d",
                     self->nmembers, self->slots);
        return -1;
    }
    if (PyObject_GetBuffer(mapping, &self->map, PyBUF_WRITABLE) < 0) return -1;
    self->mapped = 1;
    Py_ssize_t needed = PAGE + (Py_ssize_t)self->nmembers * (self->slots * (HEADER + self->slot_bytes) +
                                                             self->stage_bytes);
    if (self->map.len < needed) {
        PyErr_Format(PyExc_ValueError, "the board's mapping has %zd bytes, its layout needs %zd", self->map.len,
                     needed);
        return -1;
    }
    self->base = self->map.buf;
    self->recent = PyMem_Calloc(self->slots - 1, sizeof(uint64_t));
    if (!self->recent) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void unmap(BoardObject *self) {
    if (self->mapped) {
        PyBuffer_Release(&self->map);
        self->mapped = 0;
        self->base = NULL;
    }
}

/* A call waiting on another thread (the group's worker) keeps the mapping until it returns, failing at its next
 * look instead of reading memory let go of under it. */
static PyObject *board_release(BoardObject *self, PyObject *unused) {
    self->closing = 1;
    if (!self->running) unmap(self);
    Py_RETURN_NONE;
}

/* The call after which this member's next post may take its slot, or -1 when nobody can still read it. */
static long long oldest_unread(BoardObject *b) {
    if (b->posts < (uint64_t)b->slots) return -1;
    return (long long)b->recent[b->posts % (b->slots - 1)];
}

static int advance(BoardObject *b, uint64_t seq) {
    b->recent[b->posts % (b->slots - 1)] = seq;
    b->current = (int)(b->posts % b->slots);
    b->posts++;
    return b->current;
}

static PyObject *board_oldest_unread(BoardObject *self, PyObject *unused) {
    return PyLong_FromLongLong(oldest_unread(self));
}

static PyObject *board_advance(BoardObject *self, PyObject *arg) {
    unsigned long long seq = PyLong_AsUnsignedLongLong(arg);
    if (seq == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLong(advance(self, seq));
}

static void wake_others(BoardObject *b, int me) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST); /* the post is visible before we look who sleeps */
    for (int m = 0; m < b->nmembers; m++) {
        if (m != me && __atomic_load_n(sleeping_of(b, m), __ATOMIC_ACQUIRE)) {
            __atomic_add_fetch(bell_of(b, m), 1, __ATOMIC_SEQ_CST);
            futex_wake_all(bell_of(b, m));
        }
    }
}

enum { READY_POSTED, READY_LATEST_PAST, READY_FINISHED, READY_RESULTS };

static int ready(BoardObject *b, int member, int what, uint64_t seq) {
    if (what == READY_POSTED) return find_slot(b, member, seq) >= 0;
    uint64_t *word = what == READY_LATEST_PAST ? latest_of(b, member)
                     : what == READY_FINISHED  ? finished_of(b, member)
                                               : results_of(b, member);
    return load(word) > seq;
}

static int drop_ready(BoardObject *b, int *missing, int count, int what, uint64_t seq) {
    int kept = 0;
    for (int i = 0; i < count; i++)
        if (!ready(b, missing[i], what, seq)) missing[kept++] = missing[i];
    return kept;
}

static PyObject *member_list(int *missing, int count) {
    PyObject *list = PyList_New(count);
    for (int i = 0; list && i < count; i++) PyList_SET_ITEM(list, i, PyLong_FromLong(missing[i]));
    return list;
}

/* between([the `count` members of `missing`]), with the call's number after them when `call_seq` is not NULL (a
 * lane's call), made a Python int only now: waits seldom get this far. Its answer, or NULL with an error set. */
static PyObject *ask_between(PyObject *between, int *missing, int count, const uint64_t *call_seq) {
    PyObject *list = member_list(missing, count);
    if (!list) return NULL;
    PyObject *number = call_seq ? PyLong_FromUnsignedLongLong(*call_seq) : NULL;
    PyObject *outcome = !call_seq ? PyObject_CallOneArg(between, list)
                        : number  ? PyObject_CallFunctionObjArgs(between, list, number, NULL)
                                  : NULL;
    Py_XDECREF(number);
    Py_DECREF(list);
    return outcome;
}

/* Until every member of `members` is ready (segment.Board._wait): spin (or yield), then sleep on our bell in
 * slices, calling between(missing) before each sleep. Returns 0, or -1 with a Python error set. */
static int wait_for(BoardObject *b, int me, const int *members, int nmembers, int what, uint64_t seq,
                    double spin, double deadline, PyObject *between, const uint64_t *call_seq, const char *verb) {
    int stack[64];
    int *missing = nmembers <= 64 ? stack : PyMem_Malloc(sizeof(int) * nmembers);
    int count = 0, result = 0;
    if (!missing) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < nmembers; i++)
        if (members[i] != me && !ready(b, members[i], what, seq)) missing[count++] = members[i];
    if (!count) goto done;
    int yielding = b->yielding && b->yield_seconds > 0 && !b->long_copies;
    double window = yielding ? b->yield_seconds : spin;
    Py_BEGIN_ALLOW_THREADS double end = monotonic() + window;
    if (end > deadline) end = deadline;
    for (int polls = 0; count; polls++) {
        count = drop_ready(b, missing, count, what, seq);
        if (!count) break;
        if (yielding) {
            sched_yield(); /* may hand over a whole time slice: the clock is read after every one */
            if (monotonic() >= end) break;
        } else if (polls % SPIN_CHECK == SPIN_CHECK - 1 && monotonic() >= end) {
            break;
        }
    }
    Py_END_ALLOW_THREADS;
    while (count) {
        if (b->closing) {
            PyErr_SetString(PyExc_RuntimeError, "the group's board was closed while a call waited on it");
            result = -1;
            goto done;
        }
        /* Only members still missing matter: one that posted and then left is no reason to fail this call. */
        PyObject *outcome = ask_between(between, missing, count, call_seq);
        if (!outcome) {
            /* A post is visible before its member is seen gone: a second look tells one that left after
             * posting from one that never posted. */
            count = drop_ready(b, missing, count, what, seq);
            if (count || !PyErr_ExceptionMatches(PyExc_Exception)) { /* an interrupt is never swallowed */
                result = -1;
                goto done;
            }
            PyErr_Clear();
            goto done;
        }
        Py_DECREF(outcome);
        double remaining = deadline - monotonic();
        if (remaining <= 0) {
            PyObject *names = member_list(missing, count);
            if (names) {
                PyErr_Format(PyExc_TimeoutError, "members %R of the board had not %s", names, verb);
                Py_DECREF(names);
            }
            result = -1;
            goto done;
        }
        uint32_t *bell = bell_of(b, me);
        uint32_t seen = __atomic_load_n(bell, __ATOMIC_ACQUIRE);
        __atomic_store_n(sleeping_of(b, me), 1, __ATOMIC_SEQ_CST);
        count = drop_ready(b, missing, count, what, seq);
        if (count) {
            int code;
            Py_BEGIN_ALLOW_THREADS code = futex_sleep(bell, seen, remaining < SLEEP_SLICE ? remaining : SLEEP_SLICE);
            Py_END_ALLOW_THREADS if (code) {
                __atomic_store_n(sleeping_of(b, me), 0, __ATOMIC_SEQ_CST);
                errno = code;
                PyErr_SetFromErrno(PyExc_OSError);
                result = -1;
                goto done;
            }
        }
        __atomic_store_n(sleeping_of(b, me), 0, __ATOMIC_SEQ_CST);
        count = drop_ready(b, missing, count, what, seq);
    }
done:
    if (missing != stack) PyMem_Free(missing);
    return result;
}

/* Until every other member is ready (`what`) past call `oldest`: wait_for on all. 0, or -1 with an error set. */
static int all_members_ready(BoardObject *b, int me, int what, long long oldest, double spin, double deadline,
                             PyObject *between, const uint64_t *call_seq, const char *verb) {
    for (int m = 0; m < b->nmembers; m++) {
        if (m != me && !ready(b, m, what, (uint64_t)oldest)) {
            int stack[64], *everyone = b->nmembers <= 64 ? stack : PyMem_Malloc(sizeof(int) * b->nmembers);
            if (!everyone) {
                PyErr_NoMemory();
                return -1;
            }
            for (int i = 0; i < b->nmembers; i++) everyone[i] = i;
            int result = wait_for(b, me, everyone, b->nmembers, what, (uint64_t)oldest, spin, deadline, between,
                                  call_seq, verb);
            if (everyone != stack) PyMem_Free(everyone);
            return result;
        }
    }
    return 0;
}

static char *scratch(BoardObject *b, Py_ssize_t bytes) {
    if (b->scratch_bytes < bytes) {
        char *more = PyMem_Realloc(b->scratch, bytes);
        if (!more) {
            PyErr_NoMemory();
            return NULL;
        }
        b->scratch = more;
        b->scratch_bytes = bytes;
    }
    return b->scratch;
}

/* Whether two buffers share a byte. */
static inline int overlap(const char *a, Py_ssize_t a_bytes, const char *b, Py_ssize_t b_bytes) {
    return a < b + b_bytes && b < a + a_bytes;
}

/* Where a member's published elements [start, start + count) are (its slot leaves out its own block, which it
 * reads from its input; a post by reference holds the whole input), or NULL when they are not all there. */
static const char *posted_at(BoardObject *b, PlanObject *p, int member, int slot, Py_ssize_t start, Py_ssize_t count,
                             const char *input, Py_ssize_t input_bytes, const Py_ssize_t *posted_bytes,
                             int mine_by_reference) {
    Py_ssize_t item = p->itemsize;
    if (member == p->me && (p->own_blocks || mine_by_reference))
        return (start + count) * item <= input_bytes ? input + start * item : NULL;
    if (p->own_blocks) {
        Py_ssize_t lo = p->own_blocks[2 * member], hi = p->own_blocks[2 * member + 1];
        if (start >= hi) start -= hi - lo;
    }
    if ((start + count) * item > posted_bytes[member]) return NULL;
    return slot_of(b, member, slot) + HEADER + start * item;
}

/* A member whose memory could not be read holds its post (it waits for its readers otherwise), so it died: until
 * the deadline, between([member]) raises what the transport says of it (board/run.py's _poster_lost). */
static void poster_lost(int member, int code, double deadline, PyObject *between, const uint64_t *call_seq) {
    while (monotonic() < deadline) {
        PyObject *outcome = ask_between(between, &member, 1, call_seq);
        if (!outcome) return;
        Py_DECREF(outcome);
        struct timespec pause = {0, 1000000};
        Py_BEGIN_ALLOW_THREADS nanosleep(&pause, NULL);
        Py_END_ALLOW_THREADS
    }
    PyErr_Format(PyExc_TimeoutError, "could not reach member %d's memory for its post: %s", member,
                 code > 0 ? strerror(code) : "the kernel moved nothing");
}

#define RECOMPUTE (-2) /* run()'s answer when numpy's bits are not certain (combine): the caller computes in numpy */
#define READ_RATE 4e9  /* bytes per second a reader copies by reference, low (board/run.py's _READ_RATE) */
#define PIECE_BYTES (256 << 10) /* a two-shot block is reduced and written on in pieces of this size (run.py's) */

/* Where bytes [offset, offset + bytes) of a member's staged post are in its staging area (its output word says
 * where its post starts), or NULL with an error set. */
static char *staged_bytes(BoardObject *b, int member, const uint64_t *theirs, Py_ssize_t offset, Py_ssize_t bytes) {
    Py_ssize_t at = (Py_ssize_t)theirs[6];
    if (offset < 0 || bytes < 0 || at < 0 || at + offset + bytes > b->stage_bytes) {
        PyErr_Format(PyExc_ValueError, "member %d's staged post has no bytes %zd to %zd", member, offset,
                     offset + bytes);
        return NULL;
    }
    return stage_of(b, member) + at + offset;
}

/* Copy `bytes` between `local` and byte `offset` of a member's post by reference (its output when `writing`): out
 * of its staging area when its address is 0 (staged), else from its memory; on failure, poster_lost. 0, or -1
 * with an error set. */
static int move_member(BoardObject *b, int member, int slot, Py_ssize_t offset, char *local, Py_ssize_t bytes,
                       int writing, double deadline, PyObject *between, const uint64_t *call_seq) {
    uint64_t *theirs = (uint64_t *)slot_of(b, member, slot);
    Py_ssize_t done;
    int code;
    if (!writing && theirs[5] == 0) { /* staged */
        const char *from = staged_bytes(b, member, theirs, offset, bytes);
        if (!from) return -1;
        Py_BEGIN_ALLOW_THREADS memcpy(local, from, bytes);
        Py_END_ALLOW_THREADS return 0;
    }
    Py_BEGIN_ALLOW_THREADS code = vm_copy((int)theirs[4], local, theirs[writing ? 6 : 5] + offset, bytes, writing,
                                          &done);
    Py_END_ALLOW_THREADS if (!code) return 0;
    poster_lost(member, code, deadline, between, call_seq);
    return -1;
}

/* Elements [start, start + count) of a member's post by reference: where they are in its staging area, or copied
 * into `room` out of its memory (move_member). NULL with an error set. */
static const char *by_reference_part(BoardObject *b, PlanObject *p, int member, int slot, Py_ssize_t start,
                                     Py_ssize_t count, char *room, double deadline, PyObject *between,
                                     const uint64_t *call_seq) {
    uint64_t *theirs = (uint64_t *)slot_of(b, member, slot);
    Py_ssize_t offset = start * p->itemsize, bytes = count * p->itemsize;
    if (offset + bytes > (Py_ssize_t)theirs[1]) {
        PyErr_Format(PyExc_ValueError, "member %d posted fewer bytes than the plan reads", member);
        return NULL;
    }
    if (theirs[5] == 0) return staged_bytes(b, member, theirs, offset, bytes);
    return move_member(b, member, slot, offset, room, bytes, 0, deadline, between, call_seq) < 0 ? NULL : room;
}

/* The two-shot all-reduce's share of this member (board/run.py's _two_shot): its block of every member's input,
 * read a piece at a time, reduced in rank order, and written into every member's output. 0; -1 with an error set;
 * or 1 when numpy's bits are not certain in the piece from element *resume on, which nothing has been written
 * from: numpy goes on from there (run.py's settle), with this member's input whole. */
static int reduce_and_write(BoardObject *b, PlanObject *p, const char *input, Py_ssize_t input_bytes, Py_buffer *out,
                            const int *where, double deadline, PyObject *between, const uint64_t *call_seq,
                            Py_ssize_t *resume) {
    Py_ssize_t item = p->itemsize, step = PIECE_BYTES / item > 0 ? PIECE_BYTES / item : 1;
    int me = p->me;
    if (p->hi * item > out->len || p->hi * item > input_bytes) {
        PyErr_SetString(PyExc_ValueError, "the two-shot block does not fit the call's buffers");
        return -1;
    }
    int in_place = overlap(out->buf, out->len, input, input_bytes);
    /* Member 0 of two reduces in place, as the Python path does, once it has made sure numpy's bits are certain,
     * so that its input is whole if they are not; every other reduces aside. */
    int aside = in_place && (me != 0 || p->nmembers > 2);
    char *room = scratch(b, 2 * step * item);
    if (!room) return -1;
    char *part = room + step * item;
    for (Py_ssize_t start = p->lo; start < p->hi; start += step) {
        Py_ssize_t count = p->hi - start < step ? p->hi - start : step, bytes = count * item, offset = start * item;
        char *target = aside ? room : (char *)out->buf + offset;
        if (me == 0) {
            if (target != input + offset) memcpy(target, input + offset, bytes);
        } else if (move_member(b, 0, where[0], offset, target, bytes, 0, deadline, between, call_seq) < 0) {
            return -1;
        }
        for (int m = 1; m < p->nmembers; m++) {
            const char *from = input + offset;
            if (m != me) {
                if (move_member(b, m, where[m], offset, part, bytes, 0, deadline, between, call_seq) < 0) return -1;
                from = part;
            }
            if ((in_place && !aside && unsure(p->type, p->op, target, from, count)) ||
                combine(p->type, p->op, target, from, count)) {
                *resume = start;
                return 1;
            }
        }
        if (aside) memcpy((char *)out->buf + offset, target, bytes);
        for (int m = 0; m < p->nmembers; m++)
            if (m != me && move_member(b, m, where[m], offset, target, bytes, 1, deadline, between, call_seq) < 0)
                return -1;
    }
    return 0;
}

/* Where in its staging area this member stages a post of `nbytes` (segment.py's _stage_at): one of up to `defer_to`
 * bytes within half the area in the half whose last deferred post is older, deferred; any other at its start,
 * waited for.
 * Either way, once every other member has finished reading the deferred posts it overwrites. -1 with an error set. */
static Py_ssize_t stage_at(BoardObject *b, int me, Py_ssize_t nbytes, Py_ssize_t defer_to, int *defer, double spin,
                           double deadline, PyObject *between, const uint64_t *call_seq) {
    Py_ssize_t half = b->stage_bytes / 2;
    uint64_t *deferred = deferred_of(b, me);
    *defer = nbytes <= defer_to && nbytes <= half;
    int newer = deferred[1] > deferred[0];
    for (int h = 0; h < 2; h++) {
        if (deferred[h] && (!*defer || h != newer)) {
            if (all_members_ready(b, me, READY_FINISHED, (long long)deferred[h] - 1, spin, deadline, between,
                                 call_seq, "finished reading this member's earlier post") < 0)
                return -1;
            deferred[h] = 0;
        }
    }
    return *defer ? (Py_ssize_t)(!newer) * half : 0;
}

/* The staged two-shot all-reduce's share of this member, once every member has staged its input less its block
 * (board/run.py's _run_staged_two_shot, the same steps): its block reduced a piece at a time in rank order from
 * the members' areas (its own from its input) into the place its block left in its area, and into its output; its
 * results said to be there; every other member's block of results copied out of that member's area. 0; -1 with an
 * error set; or 1 when numpy's bits are not certain in the piece from element *resume on, which nothing has been
 * copied from: numpy goes on from there (run.py's settle). */
static int reduce_staged(BoardObject *b, PlanObject *p, uint64_t seq, const char *input, Py_buffer *out,
                         const int *where, double spin, double deadline, PyObject *between,
                         const uint64_t *call_seq, Py_ssize_t *resume) {
    Py_ssize_t item = p->itemsize, step = PIECE_BYTES / item > 0 ? PIECE_BYTES / item : 1, unsure_from = -1;
    int me = p->me, result = -1;
    const char *on_stack[64], **areas = p->nmembers <= 64 ? on_stack : PyMem_Malloc(sizeof(char *) * p->nmembers);
    if (!areas) {
        PyErr_NoMemory();
        return -1;
    }
    char *results = NULL; /* its own area, where its block's results go */
    for (int m = 0; m < p->nmembers; m++) {
        uint64_t *theirs = (uint64_t *)slot_of(b, m, where[m]);
        char *area = theirs[5] == 0 ? staged_bytes(b, m, theirs, 0, out->len) : NULL;
        if (!area) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "member %d's post is not staged", m);
            goto done;
        }
        areas[m] = m == me ? input : area;
        if (m == me) results = area;
    }
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t start = p->lo; start < p->hi && unsure_from < 0; start += step) {
        Py_ssize_t count = p->hi - start < step ? p->hi - start : step, bytes = count * item, offset = start * item;
        char *target = results + offset;
        memcpy(target, areas[0] + offset, bytes);
        for (int m = 1; m < p->nmembers && unsure_from < 0; m++)
            if (combine(p->type, p->op, target, areas[m] + offset, count)) unsure_from = start;
        if (unsure_from < 0) memcpy((char *)out->buf + offset, target, bytes);
    }
    Py_END_ALLOW_THREADS if (unsure_from >= 0) {
        *resume = unsure_from;
        result = 1;
        goto done;
    }
    __atomic_store_n(results_of(b, me), seq + 1, __ATOMIC_RELEASE);
    wake_others(b, me);
    if (wait_for(b, me, p->read, p->nread, READY_RESULTS, seq, spin, deadline, between, call_seq,
                 "put their results on the board") < 0)
        goto done;
    Py_BEGIN_ALLOW_THREADS for (int m = 0; m < p->nmembers; m++) {
        Py_ssize_t lo = p->own_blocks[2 * m] * item, hi = p->own_blocks[2 * m + 1] * item;
        if (m != me) memcpy((char *)out->buf + lo, areas[m] + lo, hi - lo);
    }
    Py_END_ALLOW_THREADS result = 0;
done:
    if (areas != on_stack) PyMem_Free(areas);
    return result;
}

/* One board call (board/run.py's run, the same steps), on buffers already taken: None; the first member whose post
 * carries another fingerprint; RECOMPUTE; or (RECOMPUTE, start) from the two-shot all-reduce. A post larger than a
 * slot goes by reference, as every two-shot post does. `between` is called with the members still missing, and
 * with `call_seq` after them when that is not NULL. */
static PyObject *run_call(BoardObject *b, PlanObject *p, uint64_t seq, Py_buffer *in, Py_buffer *out, double spin,
                          double deadline, PyObject *between, const uint64_t *call_seq) {
    if (p->nmembers != b->nmembers) {
        PyErr_Format(PyExc_ValueError, "a plan for %d members on a board of %d", p->nmembers, b->nmembers);
        return NULL;
    }
    int have_in = in != NULL, have_out = out != NULL;
    PyObject *result = NULL;
    Py_ssize_t stack_bytes[64], *posted_bytes = NULL;
    int stack_slots[64], *where = NULL;
    int me = p->me;
    Py_ssize_t item = p->itemsize;
    Py_ssize_t own = p->own_lo >= 0 ? (p->own_hi - p->own_lo) * item : 0;
    int mine_by_reference = p->by_reference, deferred = 0; /* deferred: staged, and its readers not waited for */
    /* a post of its whole input less its own block, or of its first `published` elements */
    if ((p->published && !have_in) || (!mine_by_reference && p->published * item > b->slot_bytes) ||
        (p->writes && !have_out) ||
        (p->own_lo >= 0 ? !have_in || in->len != p->published * item + own || p->own_hi * item > in->len
                        : have_in && in->len < p->published * item)) {
        PyErr_SetString(PyExc_ValueError, "the call's input does not fit the plan");
        return NULL;
    }
    posted_bytes = p->nmembers <= 64 ? stack_bytes : PyMem_Malloc(sizeof(Py_ssize_t) * p->nmembers);
    where = p->nmembers <= 64 ? stack_slots : PyMem_Malloc(sizeof(int) * p->nmembers);
    if (!posted_bytes || !where) {
        PyErr_NoMemory();
        goto finally;
    }
    b->long_copies = p->long_copies;
    const char *input = have_in ? in->buf : NULL;
    /* bytes posted: by reference, its whole input (its own block left out later); else its `published` elements */
    Py_ssize_t nbytes = mine_by_reference && p->own_lo >= 0 ? in->len : p->published * item;
    int staged = mine_by_reference && !p->writes && p->stage_from >= 0 && nbytes >= p->stage_from &&
                 nbytes <= b->stage_bytes; /* segment.py */
    Py_ssize_t at = 0;
    if (p->stages_two_shot && (!staged || !have_out || out->len != nbytes)) {
        PyErr_SetString(PyExc_ValueError, "the staged two-shot all-reduce's buffers do not fit its staging area");
        goto finally;
    }
    if (staged) {
        at = stage_at(b, me, nbytes, p->defer_to, &deferred, spin, deadline, between, call_seq);
        if (at < 0) goto finally;
    }
    /* post: the slot it takes held its call `slots` calls ago, which every member has read once it posted the
     * call after it */
    long long oldest = oldest_unread(b);
    if (oldest >= 0 &&
        all_members_ready(b, me, READY_LATEST_PAST, oldest, spin, deadline, between, call_seq, "posted") < 0)
        goto finally;
    int slot = advance(b, seq);
    char *mine = slot_of(b, me, slot);
    uint64_t *words = (uint64_t *)mine;
    /* where peers write its results, or where in its staging area a staged post is */
    words[6] = p->writes ? (uint64_t)(uintptr_t)out->buf : (uint64_t)at;
    words[7] = (uint64_t)p->writes; /* whether peers write into our output */
    if (mine_by_reference) { /* where its input is: the readers copy from it, and it waits for them */
        if (staged) { /* less its own block, which only it reads: the rest keeps its offsets */
            Py_ssize_t start = p->own_lo >= 0 ? p->own_lo * item : nbytes;
            Py_ssize_t stop = p->own_lo >= 0 ? p->own_hi * item : nbytes;
            char *stage = stage_of(b, me) + at;
            Py_BEGIN_ALLOW_THREADS memcpy(stage, input, start);
            memcpy(stage + stop, input + stop, nbytes - stop);
            Py_END_ALLOW_THREADS
            if (deferred) deferred_of(b, me)[at ? 1 : 0] = seq + 1;
        }
        words[5] = staged ? 0 : (uint64_t)(uintptr_t)input; /* address 0: in the staging area */
        words[4] = (uint64_t)getpid();
    } else {
        words[4] = 0; /* pid: in the slot, not by reference */
        if (p->own_lo >= 0) { /* its input less its own block */
            Py_ssize_t start = p->own_lo * item, stop = p->own_hi * item;
            if (start) memcpy(mine + HEADER, input, start);
            if (stop < in->len) memcpy(mine + HEADER + start, input + stop, in->len - stop);
        } else if (nbytes) {
            memcpy(mine + HEADER, input, nbytes);
        }
    }
    memcpy(mine + 16, p->fingerprint, 16);
    words[1] = (uint64_t)nbytes;
    __atomic_store_n(&words[0], seq + 1, __ATOMIC_RELEASE);
    __atomic_store_n(latest_of(b, me), seq + 1, __ATOMIC_RELEASE);
    wake_others(b, me);

    if (wait_for(b, me, p->read, p->nread, READY_POSTED, seq, spin, deadline, between, call_seq, "posted") < 0)
        goto finally;
    int read_by_reference = 0;
    for (int i = 0; i < p->nread; i++) {
        int member = p->read[i], s = find_slot(b, member, seq);
        if (s < 0) {
            PyErr_Format(PyExc_RuntimeError, "member %d's post of call %llu is gone from the board", member,
                         (unsigned long long)seq);
            goto finally;
        }
        uint64_t *theirs = (uint64_t *)slot_of(b, member, s);
        if (memcmp(slot_of(b, member, s) + 16, p->fingerprint, 16) != 0 || theirs[7] != (uint64_t)p->writes ||
            (theirs[4] != 0 && !p->some_by_reference)) {
            result = PyLong_FromLong(member);
            goto finally;
        }
        where[member] = s;
        read_by_reference |= theirs[4] != 0;
        posted_bytes[member] = theirs[4] != 0 || theirs[1] <= (uint64_t)b->slot_bytes ? (Py_ssize_t)theirs[1] : 0;
    }
    where[me] = slot;
    posted_bytes[me] = nbytes;
    const Py_ssize_t input_bytes = have_in ? in->len : 0;
    char *aside = NULL; /* an output over the input its readers copy from, computed here until they finish */
    Py_ssize_t aside_bytes = have_out ? out->len : 0;
    if (p->computes && have_out) {
        char *target = out->buf;
        if (p->writes || p->stages_two_shot) {
            Py_ssize_t resume = 0;
            int reduced = p->writes ? reduce_and_write(b, p, input, input_bytes, out, where, deadline, between,
                                                       call_seq, &resume)
                                    : reduce_staged(b, p, seq, input, out, where, spin, deadline, between, call_seq,
                                                    &resume);
            if (reduced < 0) goto finally;
            if (reduced > 0) { /* numpy goes on; the readers' finish and wait are its (run.py's settle) */
                result = Py_BuildValue("(in)", RECOMPUTE, resume);
                goto finally;
            }
        } else if (p->reducing) {
            Py_ssize_t count = p->hi - p->lo, bytes = count * item;
            Py_ssize_t step = read_by_reference && PIECE_BYTES / item > 0 ? PIECE_BYTES / item : (count ? count : 1);
            if (bytes > out->len) {
                PyErr_SetString(PyExc_ValueError, "the output is smaller than the plan's result");
                goto finally;
            }
            /* what it reads of its own input (its own block, or all of it posted by reference) must not be
             * overwritten first: an output over it is computed aside, and copied over once its readers finish */
            int over = (p->own_blocks || mine_by_reference) && have_in && overlap(out->buf, out->len, input, in->len);
            Py_ssize_t room_bytes = (over ? bytes : 0) + (read_by_reference ? step * item : 0);
            char *room = room_bytes ? scratch(b, room_bytes) : NULL;
            if (room_bytes && !room) goto finally;
            if (over) target = room;
            if (over && mine_by_reference && p->nreaders) aside = room;
            char *copied = room + (over ? bytes : 0); /* a piece of a post copied out of its member's memory */
            for (Py_ssize_t start = p->lo; start < p->hi; start += step) {
                Py_ssize_t n = p->hi - start < step ? p->hi - start : step;
                char *into = target + (start - p->lo) * item;
                for (int m = 0; m < p->nmembers; m++) {
                    uint64_t *theirs = m == me ? NULL : (uint64_t *)slot_of(b, m, where[m]);
                    const char *part = theirs && theirs[4] != 0
                                           ? by_reference_part(b, p, m, where[m], start, n, copied, deadline,
                                                               between, call_seq)
                                           : posted_at(b, p, m, where[m], start, n, input, input_bytes, posted_bytes,
                                                       mine_by_reference);
                    if (!part) {
                        if (!PyErr_Occurred())
                            PyErr_Format(PyExc_ValueError, "member %d posted fewer bytes than the plan reads", m);
                        goto finally;
                    }
                    if (m == 0) {
                        memmove(into, part, n * item);
                    } else if (combine(p->type, p->op, into, part, n)) {
                        result = PyLong_FromLong(RECOMPUTE);
                        goto finally;
                    }
                }
            }
            if (over && !aside) memcpy(out->buf, target, bytes);
            aside_bytes = bytes;
        } else {
            if (mine_by_reference && p->nreaders && overlap(out->buf, out->len, input, in->len)) {
                if (!(aside = target = scratch(b, out->len))) goto finally;
            }
            for (int i = 0; i < p->npieces; i++) {
                Py_ssize_t *piece = p->pieces + 4 * i;
                int member = (int)piece[0];
                Py_ssize_t start = piece[1], count = piece[2], at = piece[3];
                uint64_t *theirs = member == me ? NULL : (uint64_t *)slot_of(b, member, where[member]);
                if (theirs && theirs[4] != 0) { /* by reference: straight from the member's memory */
                    if ((at + count) * item > out->len || (start + count) * item > posted_bytes[member]) {
                        PyErr_Format(PyExc_ValueError, "member %d's piece does not fit the plan", member);
                        goto finally;
                    }
                    if (move_member(b, member, where[member], start * item, target + at * item, count * item, 0,
                                    deadline, between, call_seq) < 0)
                        goto finally;
                    continue;
                }
                const char *part = posted_at(b, p, member, where[member], start, count, input, input_bytes,
                                             posted_bytes, mine_by_reference);
                if ((at + count) * item > out->len || !part) {
                    PyErr_Format(PyExc_ValueError, "member %d's piece does not fit the plan", member);
                    goto finally;
                }
                memmove(target + at * item, part, count * item);
            }
        }
        if (read_by_reference) { /* its posters by reference may return */
            __atomic_store_n(finished_of(b, me), seq + 1, __ATOMIC_RELEASE);
            wake_others(b, me);
        }
    }
    if (mine_by_reference && p->nreaders && !deferred) {
        double reading = b->crowded ? 0.0 : (double)nbytes / READ_RATE;
        if (wait_for(b, me, p->readers, p->nreaders, READY_FINISHED, seq, spin + reading, deadline, between,
                     call_seq, "finished reading this member's post") < 0)
            goto finally;
    }
    if (aside) memcpy(out->buf, aside, aside_bytes);
    result = Py_None;
    Py_INCREF(result);
finally:
    b->long_copies = 0;
    if (where != NULL && where != stack_slots) PyMem_Free(where);
    if (posted_bytes != NULL && posted_bytes != stack_bytes) PyMem_Free(posted_bytes);
    return result;
}

/* A call holds the board's mapping while it runs; release() of a closing board waits for it. */
static PyObject *run_held(BoardObject *b, PlanObject *p, uint64_t seq, Py_buffer *in, Py_buffer *out, double spin,
                          double deadline, PyObject *between, const uint64_t *call_seq) {
    if (!b->mapped || b->closing) {
        PyErr_SetString(PyExc_RuntimeError, "the group's board is closed");
        return NULL;
    }
    b->running++;
    PyObject *result = run_call(b, p, seq, in, out, spin, deadline, between, call_seq);
    if (--b->running == 0 && b->closing) unmap(b);
    return result;
}

/* run(plan, seq, input, output, spin, deadline, between) -> None; the first member whose post carries another
 * fingerprint; or RECOMPUTE. */
static PyObject *board_run(BoardObject *b, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyObject_TypeCheck(args[0], &PlanType)) {
        PyErr_SetString(PyExc_TypeError, "run(plan, seq, input, output, spin, deadline, between)");
        return NULL;
    }
    unsigned long long seq = PyLong_AsUnsignedLongLong(args[1]);
    double spin = PyFloat_AsDouble(args[4]), deadline = PyFloat_AsDouble(args[5]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer in = {0}, out = {0};
    int have_in = 0, have_out = 0;
    PyObject *result = NULL;
    if (args[2] != Py_None) {
        if (PyObject_GetBuffer(args[2], &in, PyBUF_SIMPLE) < 0) return NULL;
        have_in = 1;
    }
    if (args[3] != Py_None) {
        if (PyObject_GetBuffer(args[3], &out, PyBUF_WRITABLE) < 0) goto finally;
        have_out = 1;
    }
    result = run_held(b, (PlanObject *)args[0], seq, have_in ? &in : NULL, have_out ? &out : NULL, spin, deadline,
                      args[6], NULL);
finally:
    if (have_in) PyBuffer_Release(&in);
    if (have_out) PyBuffer_Release(&out);
    return result;
}

static PyObject *board_set_waits(BoardObject *self, PyObject *args) {
    if (!PyArg_ParseTuple(args, "dpp", &self->yield_seconds, &self->yielding, &self->crowded)) return NULL;
    Py_RETURN_NONE;
}

static PyObject *board_get_current(BoardObject *self, void *closure) { return PyLong_FromLong(self->current); }
static PyObject *board_get_posts(BoardObject *self, void *closure) {
    return PyLong_FromUnsignedLongLong(self->posts);
}

static PyMethodDef board_methods[] = {
    {"run", (PyCFunction)(void (*)(void))board_run, METH_FASTCALL,
     "run(plan, seq, input, output, spin, deadline, between): one board call whose posts fit in slots; None, or "
     "the first member whose post carries another fingerprint"},
    {"oldest_unread", (PyCFunction)board_oldest_unread, METH_NOARGS,
     "the call every member must have posted past before this member's next post takes its slot, or -1"},
    {"advance", (PyCFunction)board_advance, METH_O, "take the next slot for call `seq`; returns the slot"},
    {"set_waits", (PyCFunction)board_set_waits, METH_VARARGS,
     "set_waits(yield_seconds, yielding, crowded): how the next calls wait for their peers"},
    {"release", (PyCFunction)board_release, METH_NOARGS, "let go of the mapping"},
    {NULL}};

static PyGetSetDef board_getset[] = {
    {"current", (getter)board_get_current, NULL, "the slot of this member's latest board call", NULL},
    {"posts", (getter)board_get_posts, NULL, "this member's board calls so far", NULL},
    {NULL}};

static PyTypeObject BoardType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "meshcomm.native._core.Board",
    .tp_basicsize = sizeof(BoardObject),
    .tp_dealloc = (destructor)board_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A member's turns at a group's board, and its calls that fit in slots.",
    .tp_methods = board_methods,
    .tp_getset = board_getset,
    .tp_init = (initproc)board_init,
    .tp_new = PyType_GenericNew,
};

/* ---------------------------------------------------------------- a group's turns */

/* The sequence numbers of a group's collectives and its queued calls (group/turns.py has the pure-Python twin):
 * a lane takes its number here without a lock, as every method runs whole under the GIL. */
typedef struct {
    PyObject_HEAD unsigned long long next;
    long pending; /* calls handed to the group's worker and not finished */
} TurnsObject;

/* take(queue) -> (seq, queued): the next number; queued when asked, or when calls are queued before it */
static PyObject *turns_take(TurnsObject *self, PyObject *arg) {
    int queue = PyObject_IsTrue(arg);
    if (queue < 0) return NULL;
    int queued = queue || self->pending > 0;
    if (queued) self->pending++;
    return Py_BuildValue("(KO)", self->next++, queued ? Py_True : Py_False);
}

/* take_now() -> seq, or None when calls are queued: the number of a call run at once, in one step with the look */
static PyObject *turns_take_now(TurnsObject *self, PyObject *unused) {
    if (self->pending > 0) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(self->next++);
}

static PyObject *turns_done(TurnsObject *self, PyObject *unused) {
    self->pending--;
    Py_RETURN_NONE;
}

static PyObject *turns_get_next(TurnsObject *self, void *closure) { return PyLong_FromUnsignedLongLong(self->next); }
static PyObject *turns_get_pending(TurnsObject *self, void *closure) { return PyLong_FromLong(self->pending); }

static PyMethodDef turns_methods[] = {
    {"take", (PyCFunction)turns_take, METH_O,
     "take(queue) -> (seq, queued): the next call's number; queued when asked or when calls are queued already"},
    {"take_now", (PyCFunction)turns_take_now, METH_NOARGS,
     "take_now() -> seq, or None when calls are queued: the number of a call run at once"},
    {"done", (PyCFunction)turns_done, METH_NOARGS, "a queued call finished"},
    {NULL}};

static PyGetSetDef turns_getset[] = {
    {"next", (getter)turns_get_next, NULL, "the number the next call takes", NULL},
    {"pending", (getter)turns_get_pending, NULL, "queued calls not finished", NULL},
    {NULL}};

static PyTypeObject TurnsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "meshcomm.native._core.Turns",
    .tp_basicsize = sizeof(TurnsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A group's collective numbers and queued calls.",
    .tp_methods = turns_methods,
    .tp_getset = turns_getset,
    .tp_new = PyType_GenericNew,
};

/* ---------------------------------------------------------------- a lane: a repeated call, face to board */

/* One shape of blocking call a group has run on the board by the compiled path (group/lanes.py): the same call
 * again is numbered, recorded, posted, waited for and computed here in one step. Whatever it cannot vouch for
 * (calls queued before it, an abort or a revoke, an array of another layout) it leaves to the Python path by
 * answering False, before taking a number; whatever goes wrong once it has, it hands to `fallout`. */
typedef struct {
    PyObject_HEAD TurnsObject *turns;
    BoardObject *board;
    PlanObject *plan;
    PyObject *transport; /* its `aborted` is None until it is aborted */
    PyObject *transport_attributes; /* where `aborted` is read, or NULL (common.h's attributes_holding) */
    PyObject *revoked;   /* the transport's revoked groups, a dict */
    PyObject *group_id;
    PyObject *records; /* the flight recorder's compiled ring (records.c) */
    Py_ssize_t cell;   /* where it keeps this group's latest collective */
    PyObject *group_name, *fingerprint, *algorithm, *peers;
    PyObject *check;   /* check(missing, seq): raises what makes waiting pointless */
    PyObject *fallout; /* fallout(seq, record, outcome, deadline, input, output): record the recorder's handle */
    double timeout, spin;
    Py_ssize_t input_bytes, output_bytes; /* < 0: the call has no such side here (run's is ignored) */
    int listed;           /* the side run's caller hands as a list of blocks (blocks.c): 0 neither, 1 input, 2 output */
    PyObject *array_type; /* numpy.ndarray, the one type of block a lane takes */
    Scratch scratch;
} LaneObject;

static PyObject *ABORTED, *RUN_NAME; /* "aborted" and "run", interned */
static PyTypeObject LaneType;

static int lane_traverse(LaneObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->turns);
    Py_VISIT(self->board);
    Py_VISIT(self->plan);
    Py_VISIT(self->transport);
    Py_VISIT(self->transport_attributes);
    Py_VISIT(self->revoked);
    Py_VISIT(self->records);
    Py_VISIT(self->peers);
    Py_VISIT(self->check);
    Py_VISIT(self->fallout);
    Py_VISIT(self->array_type);
    return 0;
}

static int lane_clear(LaneObject *self) {
    Py_CLEAR(self->turns);
    Py_CLEAR(self->board);
    Py_CLEAR(self->plan);
    Py_CLEAR(self->transport);
    Py_CLEAR(self->transport_attributes);
    Py_CLEAR(self->revoked);
    Py_CLEAR(self->group_id);
    Py_CLEAR(self->records);
    Py_CLEAR(self->group_name);
    Py_CLEAR(self->fingerprint);
    Py_CLEAR(self->algorithm);
    Py_CLEAR(self->peers);
    Py_CLEAR(self->check);
    Py_CLEAR(self->fallout);
    Py_CLEAR(self->array_type);
    return 0;
}

static void lane_dealloc(LaneObject *self) {
    PyObject_GC_UnTrack(self);
    lane_clear(self);
    free_scratch(&self->scratch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Lane(turns, board, plan, transport, revoked, group_id, records, group_name, fingerprint, algorithm, peers, check,
 *      fallout, timeout, spin, input_bytes, output_bytes, listed, array_type) */
static int lane_init(LaneObject *self, PyObject *args, PyObject *kwds) {
    PyObject *o[13];
    if (self->turns != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Lane is made once");
        return -1;
    }
    PyObject *array_type;
    if (!PyArg_ParseTuple(args, "O!O!O!OO!OOUOUO!OOddnniO!", &TurnsType, &o[0], &BoardType, &o[1], &PlanType, &o[2],
                          &o[3], &PyDict_Type, &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &PyTuple_Type, &o[10],
                          &o[11], &o[12], &self->timeout, &self->spin, &self->input_bytes, &self->output_bytes,
                          &self->listed, &PyType_Type, &array_type))
        return -1;
    if (!records_check(o[6], "Lane")) return -1;
    if (self->listed < 0 || self->listed > 2 || PyTuple_GET_SIZE(o[10]) == 0) {
        PyErr_SetString(PyExc_ValueError, "listed is 0, 1 (the input) or 2 (the output), among one peer or more");
        return -1;
    }
    self->array_type = Py_NewRef(array_type);
    PyObject **fields[13] = {(PyObject **)&self->turns, (PyObject **)&self->board, (PyObject **)&self->plan,
                             &self->transport, &self->revoked, &self->group_id, &self->records, &self->group_name,
                             &self->fingerprint, &self->algorithm, &self->peers, &self->check, &self->fallout};
    for (int i = 0; i < 13; i++) *fields[i] = Py_NewRef(o[i]);
    if ((self->cell = records_cell(self->records, self->group_name)) < 0) return -1;
    self->transport_attributes = attributes_holding(self->transport, ABORTED);
    return self->transport_attributes || !PyErr_Occurred() ? 0 : -1;
}

/* Whether nothing stops a call being posted now: no abort, no revoke, the board open (group.Seat._ready). */
static int lane_open(LaneObject *self) {
    if (self->turns->pending > 0 || !self->board->mapped || self->board->closing) return 0;
    return group_open(self->transport, self->transport_attributes, ABORTED, self->revoked, self->group_id);
}

/* run(input, output) -> True once the call ran here; False, before anything moved, for the Python path to run it */
static PyObject *lane_run(LaneObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "run(input, output)");
        return NULL;
    }
    if (self->turns == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Lane is made by Lane(...) before it runs");
        return NULL;
    }
    int open = lane_open(self);
    if (open <= 0) return open < 0 ? NULL : Py_NewRef(Py_False);
    Py_buffer sides[2];
    Blocks blocks;
    int taken[2] = {0, 0}, held = 0, same = args[0] == args[1] && !self->listed;
    for (int side = 0; side < 2; side++) {
        Py_ssize_t bytes = side ? self->output_bytes : self->input_bytes;
        int writable = side || (same && self->output_bytes >= 0), ok;
        if (bytes < 0 || (side && same)) continue;
        if (self->listed == side + 1) {
            ok = take_blocks(args[side], PyTuple_GET_SIZE(self->peers), bytes / PyTuple_GET_SIZE(self->peers),
                             self->array_type, args[!side], writable, &self->scratch, &blocks);
            if (ok > 0) sides[side] = blocks.whole;
            held = ok > 0;
        } else {
            ok = bytes_of(args[side], self->array_type, writable, &sides[side]);
            if (ok > 0 && sides[side].len != bytes) {
                PyBuffer_Release(&sides[side]);
                ok = 0;
            }
            taken[side] = ok > 0;
        }
        if (ok <= 0) {
            if (taken[0]) PyBuffer_Release(&sides[0]);
            if (held) release_blocks(&blocks);
            return ok < 0 ? NULL : Py_NewRef(Py_False);
        }
    }
    static char nothing[1];
    if (self->input_bytes < 0) sides[0] = (Py_buffer){.buf = nothing, .len = 0}; /* as the face's placeholder */
    Py_buffer *input = &sides[0];
    Py_buffer *output = self->output_bytes < 0 ? NULL : same ? &sides[0] : &sides[1];
    uint64_t number = self->turns->next++;
    uint64_t record = records_start(self->records, self->cell, self->group_name, (long long)number, self->fingerprint,
                                    self->algorithm, self->peers, wall_seconds());
    double deadline = deadline_after(self->timeout);
    PyObject *outcome = run_held(self->board, self->plan, number, input, output, self->spin, deadline, self->check,
                                 &number);
    PyObject *answer = NULL, *posted = NULL, *seq = NULL, *handle = NULL;
    if (outcome == Py_None && self->listed == 2) copy_out_blocks(&blocks);
    for (int side = 0; side < 2; side++)
        if (taken[side]) PyBuffer_Release(&sides[side]);
    if (outcome == Py_None) {
        records_finish(self->records, record, NULL);
        answer = Py_NewRef(Py_True);
        goto finally;
    }
    if (!outcome) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) goto finally; /* an interrupt goes straight up */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        if (traceback) PyException_SetTraceback(value, traceback);
        Py_XDECREF(type);
        Py_XDECREF(traceback);
        outcome = value;
    }
    /* A listed input whose blocks lay apart was posted from the scratch: fallout computes from those bytes, as the
     * output may be one of the blocks and written since (an in-place reduce_scatter). */
    if (self->listed == 1 && held && blocks_apart(&blocks) &&
        !(posted = PyBytes_FromStringAndSize(blocks.whole.buf, blocks.whole.len)))
        goto finally;
    PyObject *when = PyFloat_FromDouble(deadline);
    if (when && (seq = PyLong_FromUnsignedLongLong(number)) && (handle = PyLong_FromUnsignedLongLong(record))) {
        PyObject *handed[6] = {seq, handle, outcome, when, posted ? posted : args[0], args[1]};
        answer = PyObject_Vectorcall(self->fallout, handed, 6, NULL);
    }
    Py_XDECREF(when);
finally:
    if (held) release_blocks(&blocks);
    Py_XDECREF(posted);
    Py_XDECREF(outcome);
    Py_XDECREF(handle);
    Py_XDECREF(seq);
    return answer;
}

PyObject *run_lane(PyObject *lane, PyObject *input, PyObject *output) {
    PyObject *handed[3] = {lane, input, output};
    if (Py_TYPE(lane) == &LaneType) return lane_run((LaneObject *)lane, handed + 1, 2);
    return PyObject_VectorcallMethod(RUN_NAME, handed, 3, NULL);
}

static PyMethodDef lane_methods[] = {
    {"run", (PyCFunction)(void (*)(void))lane_run, METH_FASTCALL,
     "run(input, output): True once the call ran; False, before anything moved, when the Python path must run it"},
    {NULL}};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "meshcomm.native._core.Lane",
    .tp_basicsize = sizeof(LaneObject),
    .tp_dealloc = (destructor)lane_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A repeated blocking call of one shape, run from the face to the board in one step.",
    .tp_traverse = (traverseproc)lane_traverse,
    .tp_clear = (inquiry)lane_clear,
    .tp_methods = lane_methods,
    .tp_init = (initproc)lane_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
    {"futex_wait", py_futex_wait, METH_VARARGS,
     "futex_wait(address, expected, timeout): sleep while the u32 at address holds expected (GIL released)"},
    {"futex_wake", py_futex_wake, METH_O, "futex_wake(address): wake every sleeper on the u32 at address"},
    {"vm_read", py_vm_read, METH_VARARGS, "vm_read(pid, address, target): process_vm_readv of all of target"},
    {"vm_write", py_vm_write, METH_VARARGS, "vm_write(pid, address, source): process_vm_writev of all of source"},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core", "meshcomm's compiled hot path.", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__core(void) {
    if (!(ABORTED = PyUnicode_InternFromString("aborted")) || !(RUN_NAME = PyUnicode_InternFromString("run")))
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (add_type(m, "Plan", &PlanType) < 0 || add_type(m, "Board", &BoardType) < 0 ||
        add_type(m, "Turns", &TurnsType) < 0 || add_type(m, "Lane", &LaneType) < 0 || add_ring_types(m) < 0 ||
        add_records_type(m) < 0 || add_group_call_types(m) < 0 || add_front_type(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
