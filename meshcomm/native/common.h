/* What the compiled hot path's files share: the clocks, whether a group's call may start, declining a call to the
 * Python path, and waking a futex's sleepers. */
#ifndef MESHCOMM_NATIVE_COMMON_H
#define MESHCOMM_NATIVE_COMMON_H

#include <Python.h>

#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Ready `type` and add it to `module` as `name`: 0, or -1 with an error set. */
static inline int add_type(PyObject *module, const char *name, PyTypeObject *type) {
    if (PyType_Ready(type) < 0) return -1;
    return PyModule_AddObjectRef(module, name, (PyObject *)type);
}

static inline double monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* monotonic() + seconds for a call's deadline, read from the coarse clock and rounded up by its tick: never earlier, at
 * most a tick later, and a fine read costs several times as much on a virtual machine (docs/native.md). */
static inline double deadline_after(double seconds) {
    static double tick = -1;
    struct timespec ts;
    if (tick < 0) tick = clock_getres(CLOCK_MONOTONIC_COARSE, &ts) == 0 ? ts.tv_sec + ts.tv_nsec * 1e-9 : 0;
    if (tick <= 0 || tick > 0.05 || clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return monotonic() + seconds;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + tick + seconds;
}

/* The instance dict that holds `object`'s attribute `name`, a new reference, when its type reads attributes the
 * generic way and nothing on it stands for that name (a property would); else NULL: read the attribute (an error
 * set only if looking failed otherwise than by not finding it). Judged once, when a lane is made; a dict read
 * costs about half the attribute's read (docs/native.md). */
static inline PyObject *attributes_holding(PyObject *object, PyObject *name) {
    if (Py_TYPE(object)->tp_getattro != PyObject_GenericGetAttr) return NULL;
    PyObject *on_type = PyObject_GetAttr((PyObject *)Py_TYPE(object), name);
    if (on_type) {
        Py_DECREF(on_type);
        return NULL;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
    PyErr_Clear();
    PyObject *attributes = PyObject_GenericGetDict(object, NULL);
    if (attributes && PyDict_CheckExact(attributes)) return attributes;
    if (!attributes && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear(); /* it keeps no dict */
    Py_XDECREF(attributes);
    return NULL;
}

/* 1 when a group's call may start: its transport's `aborted` (the attribute `aborted_name`, read from `attributes`
 * when not NULL: see attributes_holding) is None and the group is not among the transport's `revoked` ones
 * (group.Seat._ready); 0 when not, -1 with an error set. */
static inline int group_open(PyObject *transport, PyObject *attributes, PyObject *aborted_name, PyObject *revoked,
                             PyObject *group_id) {
    PyObject *aborted = NULL;
    if (attributes) {
        aborted = Py_XNewRef(PyDict_GetItemWithError(attributes, aborted_name));
        if (!aborted && PyErr_Occurred()) return -1;
    }
    if (!aborted && !(aborted = PyObject_GetAttr(transport, aborted_name))) return -1;
    int open = aborted == Py_None;
    Py_DECREF(aborted);
    if (!open || PyDict_GET_SIZE(revoked) == 0) return open;
    if (PyDict_GetItemWithError(revoked, group_id)) return 0;
    return PyErr_Occurred() ? -1 : 1;
}

/* 0, declining: an error before a lane runs (an argument unlike what the Python path takes) is the Python path's
 * to meet, or not, as it does; only an interrupt goes straight up. */
static inline int declined(void) {
    if (!PyErr_Occurred()) return 0;
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
    PyErr_Clear();
    return 0;
}

static inline void futex_wake_all(uint32_t *word) { syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0); }

#endif
