/* A blocking send or receive of one small message through a shared-memory ring, in one compiled step.
 *
 * The rings' layout and framing are meshcomm/transport/shm.py's and peer.py's: a single-producer
 * single-consumer byte stream of frames, each a 44-byte header (transport/header.py) then the payload. A
 * MessageLane (made by meshcomm/group/lanes.py after the Python path has sent or received the same shape once)
 * writes one frame, or takes the frame at the ring's head when its header is exactly the one it expects. It
 * runs only while the Python engine has nothing in the way: no thread inside the engine, nothing queued for the
 * peer, no frame half read, no receive posted or message kept for the same key. Otherwise, and when the frame
 * is not there within the spin window, it answers None before anything moved and the Python path runs the call.
 * The GIL stays held throughout, which is what keeps the engine's threads out; the spin is bounded.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "common.h"
#include "records.h"
#include "rings.h"

#define FRAME_HEADER 44   /* transport/header.py's HEADER_BYTES */
#define RING_CONTROL 4096 /* the ring's control page, before its bytes (shm.py's _PAGE) */
#define TAIL_WORD 0       /* u64 words of the control page (shm.py's _TAIL, _HEAD) */
#define HEAD_WORD 8
#define BELL_SEQ 0 /* u32 words of a doorbell (shm.py's _SEQ, _SLEEPING) */
#define BELL_SLEEPING 16
#define SPIN_CHECK 64 /* polls between looks at the clock */

typedef struct {
    PyObject_HEAD int ready; /* made whole by MessageLane(...): run() runs only then */
    int sending;
    Py_buffer ring_map, bell_map; /* held: the mappings stay while the lane lives */
    uint64_t *tail, *head;
    char *bytes;
    uint64_t size;
    uint32_t *bell; /* the other side's doorbell: a receiver to wake, or a sender waiting for room */
    char header[FRAME_HEADER];
    Py_ssize_t nbytes;
    PyObject *peer, *inbound, *progress, *transport, *transport_attributes, *matcher, *revoked, *posted, *unexpected;
    PyObject *group_id, *expected, *key, *records, *described, *answer;
    double spin;
} MessageLaneObject;

static PyObject *ABORTED, *LOST, *SENDQ, *HELD, *TARGET, *HEADER_GOT, *LOCKED;

#define FIELDS(self)                                                                                          \
    {&self->peer,    &self->inbound, &self->progress, &self->transport, &self->transport_attributes,    \
     &self->matcher, &self->revoked, &self->posted, &self->unexpected, &self->group_id, &self->expected,   \
     &self->key,     &self->records, &self->described, &self->answer}
#define NFIELDS 15

static int message_lane_traverse(MessageLaneObject *self, visitproc visit, void *arg) {
    PyObject **fields[NFIELDS] = FIELDS(self);
    for (int i = 0; i < NFIELDS; i++) Py_VISIT(*fields[i]);
    return 0;
}

static int message_lane_clear(MessageLaneObject *self) {
    self->ready = 0;
    PyObject **fields[NFIELDS] = FIELDS(self);
    for (int i = 0; i < NFIELDS; i++) Py_CLEAR(*fields[i]);
    if (self->ring_map.obj) PyBuffer_Release(&self->ring_map);
    if (self->bell_map.obj) PyBuffer_Release(&self->bell_map);
    return 0;
}

static void message_lane_dealloc(MessageLaneObject *self) {
    PyObject_GC_UnTrack(self);
    message_lane_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* MessageLane(sending, ring_map, ring_start, ring_bytes, bell_map, header, peer, transport, group_id, expected,
 *             records, described, answer, spin): `header` is the frame's header packed, `expected` the same as
 *             transport/header.py's Header, `records` the flight recorder's compiled ring, `described` its record's
 *             fields up to the state (group, seq, words, kind, peers), `answer` what run() returns once it ran. */
static int message_lane_init(MessageLaneObject *self, PyObject *args, PyObject *kwds) {
    int sending;
    PyObject *ring_map, *bell_map, *header, *answer;
    Py_ssize_t ring_start, ring_bytes;
    PyObject *o[6];
    if (self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "a MessageLane is made once");
        return -1;
    }
    message_lane_clear(self); /* what an earlier, failed call left */
    if (!PyArg_ParseTuple(args, "pOnnOSOOOO!OO!Od", &sending, &ring_map, &ring_start, &ring_bytes, &bell_map,
                          &header, &o[0], &o[1], &o[2], &PyTuple_Type, &o[3], &o[4], &PyTuple_Type, &o[5], &answer,
                          &self->spin))
        return -1;
    if (PyBytes_GET_SIZE(header) != FRAME_HEADER) {
        PyErr_Format(PyExc_ValueError, "a frame's header has %d bytes", FRAME_HEADER);
        return -1;
    }
    self->answer = Py_NewRef(answer);
    if (PyObject_GetBuffer(ring_map, &self->ring_map, PyBUF_WRITABLE) < 0 ||
        PyObject_GetBuffer(bell_map, &self->bell_map, PyBUF_WRITABLE) < 0)
        return -1;
    if (ring_start < 0 || ring_bytes <= 0 || ring_start + RING_CONTROL + ring_bytes > self->ring_map.len ||
        self->bell_map.len < (BELL_SLEEPING + 1) * 4) {
        PyErr_SetString(PyExc_ValueError, "the ring does not lie inside its mapping");
        return -1;
    }
    char *control = (char *)self->ring_map.buf + ring_start;
    self->sending = sending;
    self->tail = (uint64_t *)control + TAIL_WORD;
    self->head = (uint64_t *)control + HEAD_WORD;
    self->bytes = control + RING_CONTROL;
    self->size = (uint64_t)ring_bytes;
    self->bell = (uint32_t *)self->bell_map.buf;
    memcpy(self->header, PyBytes_AS_STRING(header), FRAME_HEADER);
    uint64_t nbytes = 0; /* the header's last field, big-endian */
    for (int i = FRAME_HEADER - 8; i < FRAME_HEADER; i++) nbytes = nbytes << 8 | (unsigned char)self->header[i];
    self->nbytes = (Py_ssize_t)nbytes;
    if ((uint64_t)FRAME_HEADER + nbytes > self->size) {
        PyErr_SetString(PyExc_ValueError, "the frame does not fit in the ring");
        return -1;
    }
    PyObject *transport = o[1];
    self->peer = Py_NewRef(o[0]);
    self->transport = Py_NewRef(transport);
    if (!(self->transport_attributes = attributes_holding(transport, ABORTED)) && PyErr_Occurred()) return -1;
    self->group_id = Py_NewRef(o[2]);
    if (PyTuple_GET_SIZE(o[3]) < 1 || PyTuple_GET_SIZE(o[5]) != 5) {
        PyErr_SetString(PyExc_ValueError, "expected is a frame's Header, described 5 fields of a recorder entry");
        return -1;
    }
    self->expected = Py_NewRef(o[3]);
    self->key = Py_NewRef(PyTuple_GET_ITEM(o[3], 0));
    if (!records_check(o[4], "MessageLane")) return -1;
    self->records = Py_NewRef(o[4]);
    self->described = Py_NewRef(o[5]);
    if (!(self->inbound = PyObject_GetAttrString(self->peer, "inbound")) ||
        !(self->progress = PyObject_GetAttrString(transport, "_progress_lock")) ||
        !(self->matcher = PyObject_GetAttrString(transport, "matcher")) ||
        !(self->revoked = PyObject_GetAttrString(self->matcher, "revoked")) ||
        !(self->posted = PyObject_GetAttrString(self->matcher, "posted")) ||
        !(self->unexpected = PyObject_GetAttrString(self->matcher, "unexpected")))
        return -1;
    if (!PyDict_Check(self->revoked) || !PyDict_Check(self->posted) || !PyDict_Check(self->unexpected)) {
        PyErr_SetString(PyExc_TypeError, "the matcher's tables are dicts");
        return -1;
    }
    self->ready = 1;
    return 0;
}

/* 1 when `owner.name` is None, 0 when not, -1 with an error set. */
static int is_none(PyObject *owner, PyObject *name) {
    PyObject *value = PyObject_GetAttr(owner, name);
    if (!value) return -1;
    int none = value == Py_None;
    Py_DECREF(value);
    return none;
}

/* 1 when `table` holds nothing under the lane's key, 0 when it does, -1 with an error set. */
static int lacks_key(PyObject *table, PyObject *key) {
    if (PyDict_GET_SIZE(table) == 0) return 1;
    PyObject *found = PyDict_GetItemWithError(table, key);
    return found ? 0 : PyErr_Occurred() ? -1 : 1;
}

#define HEADER_HELD 2

/* Whether the Python engine leaves the ring to this lane now (see the top of this file): 1, or HEADER_HELD when
 * the frame's header was read already; 0 when it does not, -1 with an error set. */
static int engine_idle(MessageLaneObject *self) {
    PyObject *locked = PyObject_CallMethodNoArgs(self->progress, LOCKED);
    if (!locked) return -1;
    int idle = locked == Py_False;
    Py_DECREF(locked);
    if (!idle) return 0;
    int open = group_open(self->transport, self->transport_attributes, ABORTED, self->revoked, self->group_id);
    if (open <= 0 || (open = is_none(self->peer, LOST)) <= 0) return open;
    if (self->sending) {
        PyObject *queue = PyObject_GetAttr(self->peer, SENDQ);
        if (!queue) return -1;
        Py_ssize_t queued = PyObject_Size(queue);
        Py_DECREF(queue);
        return queued < 0 ? -1 : queued == 0;
    }
    if ((open = is_none(self->inbound, TARGET)) <= 0) return open;
    PyObject *got = PyObject_GetAttr(self->inbound, HEADER_GOT);
    if (!got) return -1;
    long partial = PyLong_AsLong(got);
    Py_DECREF(got);
    if (partial != 0) return partial == -1 && PyErr_Occurred() ? -1 : 0;
    if ((open = lacks_key(self->posted, self->key)) <= 0 || (open = lacks_key(self->unexpected, self->key)) <= 0)
        return open;
    /* The engine may have read the next frame's header already and left its payload in the ring (peer.py's
     * hold): when that header is the lane's, the lane takes the payload. */
    PyObject *held = PyObject_GetAttr(self->inbound, HELD);
    if (!held) return -1;
    int ours = held == Py_None ? 1 : PyObject_RichCompareBool(held, self->expected, Py_EQ) > 0 ? HEADER_HELD : 0;
    Py_DECREF(held);
    return PyErr_Occurred() ? -1 : ours;
}

static void copy_in(MessageLaneObject *self, uint64_t at, const char *from, uint64_t n) {
    uint64_t offset = at % self->size, first = n < self->size - offset ? n : self->size - offset;
    memcpy(self->bytes + offset, from, first);
    memcpy(self->bytes, from + first, n - first);
}

static void copy_out(MessageLaneObject *self, uint64_t at, char *to, uint64_t n) {
    uint64_t offset = at % self->size, first = n < self->size - offset ? n : self->size - offset;
    memcpy(to, self->bytes + offset, first);
    memcpy(to + first, self->bytes, n - first);
}

/* Tell the other side, as shm.py's Segment.ring_doorbell does; a receiver only when it sleeps. */
static void ring_bell(MessageLaneObject *self, int always_count) {
    uint32_t *sleeping = self->bell + BELL_SLEEPING;
    if (always_count) {
        __atomic_add_fetch(self->bell + BELL_SEQ, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(sleeping, __ATOMIC_ACQUIRE)) futex_wake_all(self->bell + BELL_SEQ);
        return;
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(sleeping, __ATOMIC_ACQUIRE)) {
        __atomic_add_fetch(self->bell + BELL_SEQ, 1, __ATOMIC_SEQ_CST);
        futex_wake_all(self->bell + BELL_SEQ);
    }
}

static int send_frame(MessageLaneObject *self, const char *payload) {
    uint64_t tail = *self->tail, head = __atomic_load_n(self->head, __ATOMIC_ACQUIRE);
    uint64_t frame = FRAME_HEADER + (uint64_t)self->nbytes;
    if (self->size - (tail - head) < frame) return 0;
    copy_in(self, tail, self->header, FRAME_HEADER);
    copy_in(self, tail + FRAME_HEADER, payload, (uint64_t)self->nbytes);
    __atomic_store_n(self->tail, tail + frame, __ATOMIC_RELEASE);
    ring_bell(self, 1);
    return 1;
}

/* The frame at the ring's head, into `target`, when its header is the lane's (or was, when `held`): within the
 * spin window. */
static int receive_frame(MessageLaneObject *self, char *target, int held) {
    uint64_t head = *self->head, frame = (held ? 0 : FRAME_HEADER) + (uint64_t)self->nbytes;
    char header[FRAME_HEADER];
    double end = monotonic() + self->spin;
    for (uint64_t polls = 0;; polls++) {
        uint64_t avail = __atomic_load_n(self->tail, __ATOMIC_ACQUIRE) - head;
        if (held) {
            if (avail >= frame) break;
        } else if (avail >= FRAME_HEADER) {
            copy_out(self, head, header, FRAME_HEADER);
            if (memcmp(header, self->header, FRAME_HEADER) != 0) return 0; /* another message: Python's to read */
            if (avail >= frame) break;
        }
        if (polls % SPIN_CHECK == SPIN_CHECK - 1 && monotonic() >= end) return 0;
    }
    if (held && PyObject_SetAttr(self->inbound, HELD, Py_None) < 0) return 0;
    copy_out(self, head + frame - (uint64_t)self->nbytes, target, (uint64_t)self->nbytes);
    __atomic_store_n(self->head, head + frame, __ATOMIC_RELEASE);
    ring_bell(self, 0);
    return 1;
}

/* The flight recorder's record of a finished send or receive (trace/flight_recorder.py's start_p2p, finish). */
static void record(MessageLaneObject *self, double started) {
    PyObject **d = &PyTuple_GET_ITEM(self->described, 0);
    records_finish(self->records, records_start(self->records, -1, d[0], -1, d[2], d[3], d[4], started), NULL);
}

/* run(array) -> the lane's answer once the message moved; None, before anything moved, for the Python path. */
static PyObject *message_lane_run(MessageLaneObject *self, PyObject *array) {
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "a MessageLane is made by MessageLane(...) before it runs");
        return NULL;
    }
    int idle = engine_idle(self);
    if (idle <= 0) return idle < 0 ? NULL : Py_NewRef(Py_None);
    Py_buffer data;
    if (PyObject_GetBuffer(array, &data, self->sending ? PyBUF_SIMPLE : PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    double started = wall_seconds();
    int moved = data.len == self->nbytes && (self->sending ? send_frame(self, data.buf)
                                                           : receive_frame(self, data.buf, idle == HEADER_HELD));
    PyBuffer_Release(&data);
    if (!moved) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    record(self, started);
    return Py_NewRef(self->answer);
}

static PyMethodDef message_lane_methods[] = {
    {"run", (PyCFunction)message_lane_run, METH_O,
     "run(array): the lane's answer once the message moved; None, before anything moved, for the Python path"},
    {NULL}};

static PyTypeObject MessageLaneType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "meshcomm.native._core.MessageLane",
    .tp_basicsize = sizeof(MessageLaneObject),
    .tp_dealloc = (destructor)message_lane_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A repeated blocking send or receive of one small message through a shared-memory ring.",
    .tp_traverse = (traverseproc)message_lane_traverse,
    .tp_clear = (inquiry)message_lane_clear,
    .tp_methods = message_lane_methods,
    .tp_init = (initproc)message_lane_init,
    .tp_new = PyType_GenericNew,
};

int add_ring_types(PyObject *module) {
    struct {
        PyObject **name;
        const char *text;
    } names[] = {{&ABORTED, "aborted"}, {&LOST, "lost"},             {&SENDQ, "sendq"},  {&HELD, "held"},
                 {&TARGET, "target"},   {&HEADER_GOT, "header_got"}, {&LOCKED, "locked"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*names[i].name = PyUnicode_InternFromString(names[i].text))) return -1;
    return add_type(module, "MessageLane", &MessageLaneType);
}
