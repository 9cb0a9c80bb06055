/* A numpy array's bytes without numpy's buffer export (_core.c, blocks.c).
 *
 * numpy's export describes the array's format and shape on every request: about 400 instructions that a lane, which
 * reads only the address and the length, throws away, and a scatter's root asks once per block. numpy's own headers
 * read an array's data, dimensions and flags as the leading fields of the array object, in every extension compiled
 * against them, so numpy keeps those fields where they are (its ABI since 1.7). This reads the same fields, and
 * leaves every array it is unsure of to the export (docs/native.md). */
#ifndef MESHCOMM_NATIVE_ARRAYS_H
#define MESHCOMM_NATIVE_ARRAYS_H

#include <Python.h>

/* The leading fields of numpy's PyArrayObject_fields. */
typedef struct {
    PyObject_HEAD char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} ArrayFields;

/* numpy's NPY_ARRAY_C_CONTIGUOUS and NPY_ARRAY_WRITEABLE, and its internal flag for a view that warns when written. */
enum { ARRAY_C_CONTIGUOUS = 0x0001, ARRAY_WRITEABLE = 0x0400 };
#define ARRAY_WARN_ON_WRITE ((int)(1u << 31))

/* A dtype's itemsize, remembered for the last dtype asked about; -1 with an error set. */
static inline Py_ssize_t itemsize_of(PyObject *descr) {
    static PyObject *known, *name;
    static Py_ssize_t size;
    if (descr == known) return size;
    if (!name && !(name = PyUnicode_InternFromString("itemsize"))) return -1;
    PyObject *value = PyObject_GetAttr(descr, name);
    Py_ssize_t found = value ? PyLong_AsSsize_t(value) : -1;
    Py_XDECREF(value);
    if (found < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a numpy dtype without an itemsize");
        return -1;
    }
    PyObject *old = known;
    known = Py_NewRef(descr);
    size = found;
    Py_XDECREF(old);
    return found;
}

/* 1 with `view` over the bytes of `array`, an exact numpy array (the caller checked), when they make one span and, if
 * `writable`, may be written; 0 when numpy's export must judge it; -1 with an error set. The view holds no reference,
 * so releasing it does nothing: the caller's argument keeps the array alive. */
static inline int array_span(PyObject *array, int writable, Py_buffer *view) {
    ArrayFields *fields = (ArrayFields *)array;
    int flags = fields->flags;
    if (!(flags & ARRAY_C_CONTIGUOUS) || (writable && (!(flags & ARRAY_WRITEABLE) || (flags & ARRAY_WARN_ON_WRITE))))
        return 0;
    Py_ssize_t len = itemsize_of(fields->descr);
    if (len < 0) return -1;
    for (int i = 0; i < fields->nd; i++) len *= fields->dimensions[i];
    *view = (Py_buffer){.buf = fields->data, .len = len, .readonly = !writable, .itemsize = 1, .ndim = 1};
    return 1;
}

/* 1 with `view` over the bytes of `object` when they make one span and, if `writable`, may be written: an exact
 * `array_type` array read from its fields where array_span can, anything else through its buffer export; 0 when
 * they do not (not contiguous, read-only: the face copies or names it), the export's error cleared; -1 with an error
 * set. */
static inline int bytes_of(PyObject *object, PyObject *array_type, int writable, Py_buffer *view) {
    int spanned = (PyObject *)Py_TYPE(object) == array_type ? array_span(object, writable, view) : 0;
    if (spanned) return spanned;
    if (PyObject_GetBuffer(object, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) == 0) return 1;
    PyErr_Clear();
    return 0;
}

#endif
