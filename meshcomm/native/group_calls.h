/* A torch process group's blocking call in C (group_calls.c): the module adds its type with add_group_call_types. */
#ifndef MESHCOMM_NATIVE_GROUP_CALLS_H
#define MESHCOMM_NATIVE_GROUP_CALLS_H

#include <Python.h>

int add_group_call_types(PyObject *module);

#endif
