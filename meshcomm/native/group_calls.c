/* A torch process group's allreduce, as the group's own attribute: a blocking all_reduce of one CPU tensor goes
 * from torch to the meshcomm group's lane in one compiled step (meshcomm/torch_backend/process_group.py;
 * docs/torch-backend.md).
 *
 * torch's own wrapper and its options record cost about what meshcomm's whole API call does, so a backend in
 * Python pays twice the API before it starts. This step reads the options and the tensor as the Python method
 * would, and hands the tensor's bytes to the lane the API keeps for the same key. Everything else it hands,
 * before anything moves, to the group's Python method, which runs the call.
 *
 * The bytes are the tensor's memory, found from its attributes (TensorBytes): tensor.numpy() detaches the tensor
 * first, which costs more than the rest of this step's reading. So the step declines what numpy() refuses (grad,
 * another device or layout, the negative bit), and what a lane does not take (memory out of order, no elements)
 * as well. It takes no complex dtype, so no conjugate bit: torch's all_reduce hands a complex tensor over as a
 * real view. */
#include "group_calls.h"

#include "common.h"

#include <stddef.h>

static PyObject *ASYNC_OP, *TIMEOUT, *REDUCE_OP, *DTYPE, *SHAPE, *RUN, *REQUIRES_GRAD, *IS_CPU, *LAYOUT,
    *IS_NEG, *IS_CONTIGUOUS, *NBYTES, *DATA_PTR;

typedef struct {
    PyObject_HEAD vectorcallfunc vectorcall;
    PyObject *lanes;         /* the meshcomm group's lanes, a dict */
    PyObject *key_head;      /* the API's key for this call, before the array's dtype and shape (a tuple) */
    PyObject *tensor_type;   /* torch.Tensor: a subclass takes the Python path */
    PyObject *numpy_dtypes;  /* torch dtype -> the numpy dtype of its tensors' numpy(), for those a lane takes */
    PyObject *strided;       /* torch.strided, the one layout a lane takes */
    PyObject *sum;           /* torch's ReduceOp.SUM */
    PyObject *unset;         /* timedelta(0): torch marks "no timeout" with a negative one */
    PyObject *weak_method;   /* a weakref.WeakMethod of the group's Python allreduce (the group holds this step) */
    /* The lane of the last call and the torch dtype and shape it was found for: a repeat skips building the API's
     * key. A lane the group let go still runs its calls, or declines once the group is gone (lane_open). */
    PyObject *last_dtype, *last_shape, *last_lane;
} BlockingAllreduceObject;

#define BLOCKING_FIELDS(self)                                                                                  \
    {&self->lanes,       &self->key_head, &self->tensor_type, &self->numpy_dtypes, &self->strided, &self->sum, \
     &self->unset,       &self->weak_method, &self->last_dtype, &self->last_shape, &self->last_lane}
#define BLOCKING_NFIELDS 11

static int blocking_traverse(BlockingAllreduceObject *self, visitproc visit, void *arg) {
    PyObject **fields[BLOCKING_NFIELDS] = BLOCKING_FIELDS(self);
    for (int i = 0; i < BLOCKING_NFIELDS; i++) Py_VISIT(*fields[i]);
    return 0;
}

static int blocking_clear(BlockingAllreduceObject *self) {
    PyObject **fields[BLOCKING_NFIELDS] = BLOCKING_FIELDS(self);
    for (int i = 0; i < BLOCKING_NFIELDS; i++) Py_CLEAR(*fields[i]);
    return 0;
}

static void blocking_dealloc(BlockingAllreduceObject *self) {
    PyObject_GC_UnTrack(self);
    blocking_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* BlockingAllreduce(lanes, key_head, tensor_type, numpy_dtypes, strided, sum, unset, weak_method) */
static int blocking_init(BlockingAllreduceObject *self, PyObject *args, PyObject *kwds) {
    PyObject *lanes, *key_head, *tensor_type, *numpy_dtypes, *strided, *sum, *unset, *weak_method;
    if (self->lanes != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a BlockingAllreduce is made once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!O!O!O!OOOO", &PyDict_Type, &lanes, &PyTuple_Type, &key_head, &PyType_Type,
                          &tensor_type, &PyDict_Type, &numpy_dtypes, &strided, &sum, &unset, &weak_method))
        return -1;
    if (!PyWeakref_Check(weak_method) || !PyCallable_Check(weak_method)) {
        PyErr_SetString(PyExc_TypeError, "BlockingAllreduce's weak_method must be a weakref.WeakMethod");
        return -1;
    }
    self->lanes = Py_NewRef(lanes);
    self->key_head = Py_NewRef(key_head);
    self->tensor_type = Py_NewRef(tensor_type);
    self->numpy_dtypes = Py_NewRef(numpy_dtypes);
    self->strided = Py_NewRef(strided);
    self->sum = Py_NewRef(sum);
    self->unset = Py_NewRef(unset);
    self->weak_method = Py_NewRef(weak_method);
    return 0;
}

/* 1 when the options ask for a blocking SUM with no timeout of its own; 0 when not; -1 with an error set. */
static int plain_options(BlockingAllreduceObject *self, PyObject *opts) {
    PyObject *value = PyObject_GetAttr(opts, ASYNC_OP);
    if (!value) return -1;
    int plain = value == Py_False;
    Py_DECREF(value);
    if (!plain) return 0;
    if (!(value = PyObject_GetAttr(opts, TIMEOUT))) return -1;
    plain = PyObject_RichCompareBool(value, self->unset, Py_LE);
    Py_DECREF(value);
    if (plain <= 0) return plain;
    if (!(value = PyObject_GetAttr(opts, REDUCE_OP))) return -1;
    plain = PyObject_RichCompareBool(value, self->sum, Py_EQ);
    Py_DECREF(value);
    return plain;
}

/* 1 when tensor.<name> (called when `call`) is `wanted`, 0 when not, -1 with an error set. */
static int attribute_is(PyObject *tensor, PyObject *name, int call, PyObject *wanted) {
    PyObject *value = call ? PyObject_CallMethodNoArgs(tensor, name) : PyObject_GetAttr(tensor, name);
    if (!value) return -1;
    int is = value == wanted;
    Py_DECREF(value);
    return is;
}

/* The bytes of a tensor, exported through the buffer protocol by an object that holds the tensor: an array a
 * failed call's Python path makes over them (group/lanes.py's fallout), kept by an exception, keeps it alive. */
typedef struct {
    PyObject_HEAD PyObject *tensor;
    void *memory;
    Py_ssize_t length;
} TensorBytesObject;

static void tensor_bytes_dealloc(TensorBytesObject *self) {
    Py_XDECREF(self->tensor);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int tensor_bytes_getbuffer(TensorBytesObject *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->memory, self->length, 0, flags);
}

static PyBufferProcs tensor_bytes_buffer = {.bf_getbuffer = (getbufferproc)tensor_bytes_getbuffer};

static PyTypeObject TensorBytesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "meshcomm.native._core.TensorBytes",
    .tp_basicsize = sizeof(TensorBytesObject),
    .tp_dealloc = (destructor)tensor_bytes_dealloc,
    .tp_as_buffer = &tensor_bytes_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A CPU tensor's bytes, writable, for a lane to run on.",
};

/* The tensor's bytes (a TensorBytes) when a lane may take them, with the tensor's dtype and shape (new
 * references); NULL when not, an error set or not. */
static PyObject *tensor_bytes(BlockingAllreduceObject *self, PyObject *tensor, PyObject **dtype, PyObject **shape) {
    if ((PyObject *)Py_TYPE(tensor) != self->tensor_type) return NULL;
    struct {
        PyObject *name;
        int call;
        PyObject *wanted;
    } checks[] = {{REQUIRES_GRAD, 0, Py_False}, {IS_CPU, 0, Py_True},          {LAYOUT, 0, self->strided},
                  {IS_NEG, 1, Py_False},        {IS_CONTIGUOUS, 1, Py_True}};
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        if (attribute_is(tensor, checks[i].name, checks[i].call, checks[i].wanted) <= 0) return NULL;
    PyObject *nbytes = PyObject_GetAttr(tensor, NBYTES);
    PyObject *address = nbytes ? PyObject_CallMethodNoArgs(tensor, DATA_PTR) : NULL;
    Py_ssize_t length = address ? PyLong_AsSsize_t(nbytes) : -1;
    void *memory = length > 0 ? PyLong_AsVoidPtr(address) : NULL;
    Py_XDECREF(nbytes);
    Py_XDECREF(address);
    if (!memory) return NULL; /* no elements, or torch answered oddly */
    if (!(*dtype = PyObject_GetAttr(tensor, DTYPE))) return NULL;
    if (!(*shape = PyObject_GetAttr(tensor, SHAPE))) {
        Py_CLEAR(*dtype);
        return NULL;
    }
    TensorBytesObject *view = PyObject_New(TensorBytesObject, &TensorBytesType);
    if (!view) {
        Py_CLEAR(*dtype);
        Py_CLEAR(*shape);
        return NULL;
    }
    view->tensor = Py_NewRef(tensor);
    view->memory = memory;
    view->length = length;
    return (PyObject *)view;
}

/* The lane the API keeps for a tensor of this torch dtype and shape (api/collectives.all_reduce's key, with the
 * numpy dtype and shape of its numpy()), a new reference; NULL when none, an error set or not. */
static PyObject *lane_for(BlockingAllreduceObject *self, PyObject *dtype, PyObject *shape) {
    if (self->last_lane && dtype == self->last_dtype) {
        int same = PyObject_RichCompareBool(shape, self->last_shape, Py_EQ);
        if (same) return same < 0 ? NULL : Py_NewRef(self->last_lane);
    }
    PyObject *numpy_dtype = PyDict_GetItemWithError(self->numpy_dtypes, dtype);
    if (!numpy_dtype) return NULL;
    Py_ssize_t head = PyTuple_GET_SIZE(self->key_head);
    PyObject *key = PyTuple_New(head + 2), *dims = key ? PySequence_Tuple(shape) : NULL;
    if (!dims) {
        Py_XDECREF(key);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < head; i++) PyTuple_SET_ITEM(key, i, Py_NewRef(PyTuple_GET_ITEM(self->key_head, i)));
    PyTuple_SET_ITEM(key, head, Py_NewRef(numpy_dtype));
    PyTuple_SET_ITEM(key, head + 1, dims);
    PyObject *lane = Py_XNewRef(PyDict_GetItemWithError(self->lanes, key)); /* held: the group may clear its lanes */
    Py_DECREF(key);
    if (lane) { /* the three change together, before the old ones go, which may run Python code */
        PyObject *old[3] = {self->last_dtype, self->last_shape, self->last_lane};
        self->last_dtype = Py_NewRef(dtype);
        self->last_shape = Py_NewRef(shape);
        self->last_lane = Py_NewRef(lane);
        for (int i = 0; i < 3; i++) Py_XDECREF(old[i]);
    }
    return lane;
}

/* 1 once a lane ran the call; 0 when none may, before anything moved; -1 with an error set. */
static int run_on_lane(BlockingAllreduceObject *self, PyObject *tensors, PyObject *opts) {
    if (!PyList_CheckExact(tensors) || PyList_GET_SIZE(tensors) != 1 || opts == Py_None) return 0;
    if (plain_options(self, opts) <= 0) return declined();
    PyObject *tensor = Py_NewRef(PyList_GET_ITEM(tensors, 0));
    PyObject *dtype = NULL, *shape = NULL, *view = tensor_bytes(self, tensor, &dtype, &shape);
    PyObject *lane = view ? lane_for(self, dtype, shape) : NULL;
    Py_XDECREF(dtype);
    Py_XDECREF(shape);
    if (!lane) {
        Py_XDECREF(view);
        Py_DECREF(tensor);
        return declined();
    }
    PyObject *handed[3] = {lane, view, view};
    PyObject *ran = PyObject_VectorcallMethod(RUN, handed, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(lane);
    Py_DECREF(view);
    Py_DECREF(tensor);
    if (!ran) return -1; /* the call's own failure, raised as the API raises it (group/lanes.py's fallout) */
    int answer = ran == Py_True;
    Py_DECREF(ran);
    return answer;
}

/* The group's Python allreduce, handed the call as it came; an error once the group is gone. */
static PyObject *by_method(BlockingAllreduceObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *method = PyObject_CallNoArgs(self->weak_method);
    if (!method) return NULL;
    if (method == Py_None) {
        Py_DECREF(method);
        PyErr_SetString(PyExc_RuntimeError, "allreduce called on a meshcomm process group that no longer exists");
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(method, args, nargsf, kwnames);
    Py_DECREF(method);
    return result;
}

/* allreduce(tensors, opts) as torch calls it: None once a lane ran a blocking call; the method's answer for the rest. */
static PyObject *blocking_call(BlockingAllreduceObject *self, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    if (self->lanes == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a BlockingAllreduce is made by BlockingAllreduce(...) before it runs");
        return NULL;
    }
    if (PyVectorcall_NARGS(nargsf) == 2 && !kwnames) {
        int ran = run_on_lane(self, args[0], args[1]);
        if (ran) return ran < 0 ? NULL : Py_NewRef(Py_None);
    }
    return by_method(self, args, nargsf, kwnames);
}

static PyObject *blocking_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    BlockingAllreduceObject *self = (BlockingAllreduceObject *)type->tp_alloc(type, 0);
    if (self) self->vectorcall = (vectorcallfunc)blocking_call;
    return (PyObject *)self;
}

static PyTypeObject BlockingAllreduceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "meshcomm.native._core.BlockingAllreduce",
    .tp_basicsize = sizeof(BlockingAllreduceObject),
    .tp_dealloc = (destructor)blocking_dealloc,
    .tp_vectorcall_offset = offsetof(BlockingAllreduceObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A torch process group's allreduce: a blocking one of one CPU tensor runs on the group's lane.",
    .tp_traverse = (traverseproc)blocking_traverse,
    .tp_clear = (inquiry)blocking_clear,
    .tp_init = (initproc)blocking_init,
    .tp_new = blocking_new,
};

int add_group_call_types(PyObject *module) {
    const char *names[] = {"asyncOp", "timeout",  "reduceOp", "dtype",  "shape",         "run",    "requires_grad",
                           "is_cpu",  "layout",   "is_neg", "is_contiguous", "nbytes", "data_ptr"};
    PyObject **interned[] = {&ASYNC_OP, &TIMEOUT, &REDUCE_OP, &DTYPE,  &SHAPE,         &RUN,    &REQUIRES_GRAD,
                             &IS_CPU,   &LAYOUT,  &IS_NEG, &IS_CONTIGUOUS, &NBYTES, &DATA_PTR};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*interned[i] = PyUnicode_InternFromString(names[i]))) return -1;
    if (PyType_Ready(&TensorBytesType) < 0) return -1;
    return add_type(module, "BlockingAllreduce", &BlockingAllreduceType);
}
