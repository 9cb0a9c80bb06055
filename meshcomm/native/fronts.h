/* The faces' first step in C (fronts.c): the module adds its type with add_front_type, and gives fronts run_lane. */
#ifndef MESHCOMM_NATIVE_FRONTS_H
#define MESHCOMM_NATIVE_FRONTS_H

#include <Python.h>

int add_front_type(PyObject *module);

/* lane.run(input, output), without looking the method up for the lanes _core.c makes (_core.c). */
PyObject *run_lane(PyObject *lane, PyObject *input, PyObject *output);

#endif
