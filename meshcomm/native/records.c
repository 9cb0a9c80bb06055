/* The flight recorder's ring in C (trace/flight_recorder.py; trace/records.py is the pure-Python twin).
 *
 * A record is written in place in a fixed ring, with no list, float or dict made per call: making and dropping those
 * took about a quarter of a lane's 8-byte call (docs/native.md). Lists are made only when the ring is read. Each
 * group's latest collective is also kept in a cell of its own, beyond the ring, so its progress is known after its
 * records are pushed out. */
#define PY_SSIZE_T_CLEAN
#include "records.h"

#include <time.h>

#include "common.h"

typedef struct {
    uint64_t number; /* 1 + the records written before it; 0: an empty place */
    long long seq;   /* < 0: none (a send or receive) */
    PyObject *group, *what, *algorithm, *peers;
    PyObject *error; /* "Type: message" once failed, else NULL */
    double started, ended; /* ended < 0 until it ends */
    int state;             /* an index into the recorder's states */
    Py_ssize_t cell;       /* where its group's latest is kept, or -1 */
} Record;

enum { STARTED, DONE, FAILED };

typedef struct {
    PyObject_HEAD Record *ring;
    Py_ssize_t capacity;
    uint64_t written;
    Record *cells; /* one per group that ran a collective: a copy of its latest record */
    Py_ssize_t ncells, cells_room;
    PyObject *cell_of; /* group name -> its cell's index */
    PyObject *states;  /* the words for started, done and failed, a tuple */
} RecordsObject;

static PyTypeObject RecordsType;

double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void clear_record(Record *r) {
    Py_CLEAR(r->group);
    Py_CLEAR(r->what);
    Py_CLEAR(r->algorithm);
    Py_CLEAR(r->peers);
    Py_CLEAR(r->error);
    r->number = 0;
}

/* Replace what `r` holds by what `from` names, taking references only where they differ (a lane's records name the
 * same group, call and peers each time). The old references go last, once `r` is whole: dropping one may run code. */
static void hold(Record *r, const Record *from) {
    PyObject **mine[5] = {&r->group, &r->what, &r->algorithm, &r->peers, &r->error};
    PyObject *const theirs[5] = {from->group, from->what, from->algorithm, from->peers, from->error};
    PyObject *old[5] = {NULL};
    for (int i = 0; i < 5; i++) {
        if (*mine[i] == theirs[i]) continue;
        old[i] = *mine[i];
        *mine[i] = Py_XNewRef(theirs[i]);
    }
    r->number = from->number;
    r->seq = from->seq;
    r->started = from->started;
    r->ended = from->ended;
    r->state = from->state;
    r->cell = from->cell;
    for (int i = 0; i < 5; i++) Py_XDECREF(old[i]);
}

/* Not tracked by the collector: what it holds (strings, bytes, tuples of ints, a dict of ints) makes no cycles. */
static void records_dealloc(RecordsObject *self) {
    for (Py_ssize_t i = 0; self->ring && i < self->capacity; i++) clear_record(&self->ring[i]);
    for (Py_ssize_t i = 0; i < self->ncells; i++) clear_record(&self->cells[i]);
    self->ncells = 0;
    Py_CLEAR(self->cell_of);
    Py_CLEAR(self->states);
    PyMem_Free(self->ring);
    PyMem_Free(self->cells);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Records(capacity, states): `states` the words for a started, a done and a failed call. */
static int records_init(RecordsObject *self, PyObject *args, PyObject *kwds) {
    Py_ssize_t capacity;
    PyObject *states;
    if (self->ring) {
        PyErr_SetString(PyExc_RuntimeError, "a Records is made once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "nO!", &capacity, &PyTuple_Type, &states)) return -1;
    if (capacity < 1 || PyTuple_GET_SIZE(states) != 3) {
        PyErr_SetString(PyExc_ValueError, "Records(capacity, states): capacity >= 1, and 3 states");
        return -1;
    }
    if (!(self->ring = PyMem_Calloc((size_t)capacity, sizeof(Record))) || !(self->cell_of = PyDict_New())) {
        PyErr_NoMemory();
        return -1;
    }
    self->capacity = capacity;
    self->states = Py_NewRef(states);
    return 0;
}

int records_check(PyObject *object, const char *who) {
    if (Py_TYPE(object) == &RecordsType && ((RecordsObject *)object)->ring) return 1;
    PyErr_Format(PyExc_TypeError, "%s takes the flight recorder's compiled Records, not %.100s", who,
                 Py_TYPE(object)->tp_name);
    return 0;
}

Py_ssize_t records_cell(PyObject *records, PyObject *group) {
    RecordsObject *self = (RecordsObject *)records;
    PyObject *found = PyDict_GetItemWithError(self->cell_of, group);
    if (found) return PyLong_AsSsize_t(found);
    if (PyErr_Occurred()) return -1;
    if (self->ncells == self->cells_room) {
        Py_ssize_t room = self->cells_room ? 2 * self->cells_room : 4;
        Record *cells = PyMem_Realloc(self->cells, (size_t)room * sizeof(Record));
        if (!cells) {
            PyErr_NoMemory();
            return -1;
        }
        memset(cells + self->ncells, 0, (size_t)(room - self->ncells) * sizeof(Record));
        self->cells = cells;
        self->cells_room = room;
    }
    PyObject *index = PyLong_FromSsize_t(self->ncells);
    if (!index || PyDict_SetItem(self->cell_of, group, index) < 0) {
        Py_XDECREF(index);
        return -1;
    }
    Py_DECREF(index);
    return self->ncells++;
}

uint64_t records_start(PyObject *records, Py_ssize_t cell, PyObject *group, long long seq, PyObject *what,
                       PyObject *algorithm, PyObject *peers, double started) {
    RecordsObject *self = (RecordsObject *)records;
    Record made = {.number = ++self->written, .seq = seq, .group = group, .what = what, .algorithm = algorithm,
                   .peers = peers, .started = started, .ended = -1, .state = STARTED, .cell = cell};
    hold(&self->ring[(made.number - 1) % (uint64_t)self->capacity], &made);
    if (cell >= 0) hold(&self->cells[cell], &made);
    return made.number;
}

static Record *record_numbered(RecordsObject *self, uint64_t number) {
    Record *r = number ? &self->ring[(number - 1) % (uint64_t)self->capacity] : NULL;
    return r && r->number == number ? r : NULL;
}

static void end_record(Record *r, double ended, PyObject *error) {
    r->ended = ended;
    r->state = error ? FAILED : DONE;
    Py_XSETREF(r->error, Py_XNewRef(error));
}

void records_finish(PyObject *records, uint64_t number, PyObject *error) {
    RecordsObject *self = (RecordsObject *)records;
    if (number == 0) return; /* no record has it: an empty place's */
    double ended = wall_seconds();
    Record *r = record_numbered(self, number);
    if (r) end_record(r, ended, error);
    if (r && r->cell >= 0) {
        if (self->cells[r->cell].number == number) end_record(&self->cells[r->cell], ended, error);
        return;
    }
    for (Py_ssize_t i = 0; !r && i < self->ncells; i++) /* pushed out of the ring, perhaps still its group's latest */
        if (self->cells[i].number == number) end_record(&self->cells[i], ended, error);
}

/* A record as the pure-Python ring keeps it: [group, seq, what, algorithm, peers, state, started, ended, error].
 * `r` is copied, with references of its own, before anything is allocated: an allocation may collect garbage and
 * run a finalizer, which may let another thread write the ring (or move the cells) meanwhile. */
static PyObject *listed(RecordsObject *self, const Record *r) {
    const Record copy = *r;
    PyObject *held[5] = {copy.group, copy.what, copy.algorithm, copy.peers, copy.error ? copy.error : Py_None};
    for (int i = 0; i < 5; i++) Py_INCREF(held[i]);
    PyObject *seq = copy.seq < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(copy.seq);
    PyObject *started = PyFloat_FromDouble(copy.started);
    PyObject *ended = copy.ended < 0 ? Py_NewRef(Py_None) : PyFloat_FromDouble(copy.ended);
    PyObject *row = seq && started && ended ? PyList_New(9) : NULL;
    if (!row) {
        Py_XDECREF(seq);
        Py_XDECREF(started);
        Py_XDECREF(ended);
        for (int i = 0; i < 5; i++) Py_DECREF(held[i]);
        return NULL;
    }
    PyObject *items[9] = {held[0], seq, held[1], held[2], held[3],
                          Py_NewRef(PyTuple_GET_ITEM(self->states, copy.state)), started, ended, held[4]};
    for (int i = 0; i < 9; i++) PyList_SET_ITEM(row, i, items[i]);
    return row;
}

/* start(group, seq, what, algorithm, peers) -> the record's number; seq None for a send or receive */
static PyObject *records_start_py(RecordsObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "start(group, seq, what, algorithm, peers)");
        return NULL;
    }
    long long seq = -1;
    Py_ssize_t cell = -1;
    if (args[1] != Py_None) {
        if ((seq = PyLong_AsLongLong(args[1])) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a call's seq is not negative");
            return NULL;
        }
        if ((cell = records_cell((PyObject *)self, args[0])) < 0) return NULL;
    }
    return PyLong_FromUnsignedLongLong(
        records_start((PyObject *)self, cell, args[0], seq, args[2], args[3], args[4], wall_seconds()));
}

/* finish(number, error=None): error the failure's words, a str */
static PyObject *records_finish_py(RecordsObject *self, PyObject *args) {
    unsigned long long number;
    PyObject *error = Py_None;
    if (!PyArg_ParseTuple(args, "K|O", &number, &error)) return NULL;
    if (error != Py_None && !PyUnicode_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "finish's error is the failure's words, a str, or None");
        return NULL;
    }
    records_finish((PyObject *)self, number, error == Py_None ? NULL : error);
    Py_RETURN_NONE;
}

/* rows() -> the records still in the ring, oldest first, as lists */
static PyObject *records_rows(RecordsObject *self, PyObject *unused) {
    PyObject *rows = PyList_New(0);
    uint64_t first = self->written > (uint64_t)self->capacity ? self->written - (uint64_t)self->capacity + 1 : 1;
    for (uint64_t number = first; rows && number <= self->written; number++) {
        Record *r = record_numbered(self, number);
        if (!r) continue; /* written over while an earlier row was made (listed) */
        PyObject *row = listed(self, r);
        if (!row || PyList_Append(rows, row) < 0) Py_CLEAR(rows);
        Py_XDECREF(row);
    }
    return rows;
}

/* row(number) -> that record as a list, or None once it has left the ring */
static PyObject *records_row(RecordsObject *self, PyObject *number) {
    unsigned long long n = PyLong_AsUnsignedLongLong(number);
    if (n == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    Record *r = record_numbered(self, n);
    return r ? listed(self, r) : Py_NewRef(Py_None);
}

/* latest(group) -> the group's latest collective as a list, or None before its first */
static PyObject *records_latest(RecordsObject *self, PyObject *group) {
    PyObject *found = PyDict_GetItemWithError(self->cell_of, group);
    if (!found) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_ssize_t cell = PyLong_AsSsize_t(found);
    if (cell < 0) return NULL;
    /* a lane makes its group's cell before the group's first record */
    return self->cells[cell].number ? listed(self, &self->cells[cell]) : Py_NewRef(Py_None);
}

static PyMethodDef records_methods[] = {
    {"start", (PyCFunction)(void (*)(void))records_start_py, METH_FASTCALL,
     "start(group, seq, what, algorithm, peers) -> the record's number; seq None for a send or receive"},
    {"finish", (PyCFunction)records_finish_py, METH_VARARGS, "finish(number, error=None): error a str"},
    {"rows", (PyCFunction)records_rows, METH_NOARGS, "rows() -> the records in the ring, oldest first, as lists"},
    {"row", (PyCFunction)records_row, METH_O, "row(number) -> that record as a list, or None once it left the ring"},
    {"latest", (PyCFunction)records_latest, METH_O,
     "latest(group) -> the group's latest collective as a list, or None before its first"},
    {NULL}};

static PyTypeObject RecordsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "meshcomm.native._core.Records",
    .tp_basicsize = sizeof(RecordsObject),
    .tp_dealloc = (destructor)records_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The flight recorder's ring of recent calls, written in place.",
    .tp_methods = records_methods,
    .tp_init = (initproc)records_init,
    .tp_new = PyType_GenericNew,
};

int add_records_type(PyObject *module) { return add_type(module, "Records", &RecordsType); }
