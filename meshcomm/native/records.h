/* The flight recorder's ring in C (records.c): the module adds its type with add_records_type; lanes write their
 * calls' records through the functions below, with no Python object made per call. */
#ifndef MESHCOMM_NATIVE_RECORDS_H
#define MESHCOMM_NATIVE_RECORDS_H

#include <Python.h>
#include <stdint.h>

int add_records_type(PyObject *module);

/* Whether `object` is a Records; else a TypeError naming `who` is set and 0 returned. */
int records_check(PyObject *object, const char *who);

/* The index of the cell keeping `group`'s latest collective, made on first use; -1 with an error set. */
Py_ssize_t records_cell(PyObject *records, PyObject *group);

/* A started call's record, its number returned (a handle for records_finish). `seq` < 0 for a send or receive, whose
 * `cell` is -1. Borrows every object; never fails. */
uint64_t records_start(PyObject *records, Py_ssize_t cell, PyObject *group, long long seq, PyObject *what,
                       PyObject *algorithm, PyObject *peers, double started);

/* Record `number` done, or failed with `error` (a str, borrowed) when it is not NULL: in the ring, and in its group's
 * cell while it is the group's latest, even once pushed out of the ring. */
void records_finish(PyObject *records, uint64_t number, PyObject *error);

/* time.time(), the recorder's clock. */
double wall_seconds(void);

#endif
