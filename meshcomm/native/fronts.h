/* The faces' first step in C (fronts.c): the module adds its type with add_front_type. */
#ifndef MESHCOMM_NATIVE_FRONTS_H
#define MESHCOMM_NATIVE_FRONTS_H

#include <Python.h>

int add_front_type(PyObject *module);

#endif
