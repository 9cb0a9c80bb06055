/* The shared-memory rings' small messages in C (rings.c): the module adds its types with add_ring_types. */
#ifndef MESHCOMM_NATIVE_RINGS_H
#define MESHCOMM_NATIVE_RINGS_H

#include <Python.h>

int add_ring_types(PyObject *module);

#endif
