/* A face's first step in C: a blocking call of the API on numpy arrays, whose lane the group already keeps, goes
 * from the caller to that lane without running the face's Python (meshcomm/api/fronts.py; docs/native.md).
 *
 * A Front stands in the API's module for one face. It binds the call's arguments as the face's signature does,
 * holds each to the rule the face's own lane test holds it to, builds the face's lane key and runs the lane it
 * finds there. A rule may be stricter than the face's: that only sends more calls to the face. Every call it does
 * not run, it hands to the face as it came, and the face runs it as before, checks and all. */
#include "fronts.h"

#include "arrays.h"
#include "common.h"

#include <stddef.h>

/* What a parameter must be for the front to run the call. */
enum { ANY, IS_NONE, IS_FALSE, ROOT, LISTED, ARRAY, OP, GROUP, RULES };
static const char *RULE_NAMES[RULES] = {"any", "none", "false", "root", "list", "array", "op", "group"};
/* What an item of the key is: a constant, or a parameter's value, dtype, shape or emptiness (`not value`). */
enum { CONSTANT, VALUE, DTYPE, SHAPE, EMPTY, KINDS };
static const char *KIND_NAMES[KINDS] = {"constant", "value", "dtype", "shape", "empty"};

#define MOST_PARAMETERS 12
#define MOST_ITEMS 8

static PyObject *DTYPE_NAME, *SHAPE_NAME, *RUNTIME_NAME, *WORLD_NAME, *LANES_NAME;

typedef struct {
    PyObject_HEAD vectorcallfunc vectorcall;
    PyObject *face;       /* the Python function: every call the front does not run */
    PyObject *names;      /* the face's parameter names, in order (a tuple) */
    PyObject *defaults;   /* each parameter's default, or `required` (a tuple) */
    PyObject *required;   /* what stands for "no default" in defaults */
    PyObject *constants;  /* the key's constant items, None at the others (a tuple) */
    PyObject *state;      /* the API state's namespace: its _runtime's world holds the world's lanes */
    PyObject *group_type, *op_type, *array_type;
    PyObject *dict;       /* the face's name, doc and __wrapped__ (functools.update_wrapper) */
    PyObject *weakrefs;
    /* The last call's lane, with the key it was found by and where: the group (or the runtime, for the world) and
     * its lanes. A repeat skips looking them up; a lane a group let go still runs its calls, or declines once the
     * group is gone (lane_open), and a declined lane is forgotten. */
    PyObject *last_holder, *last_lanes, *last_key, *last_lane;
    Py_ssize_t positional, nparams, nitems;
    int input, output, group; /* the parameters handed to the lane, and the one naming the group */
    signed char rules[MOST_PARAMETERS];
    signed char kinds[MOST_ITEMS], params[MOST_ITEMS];
} FrontObject;

#define FRONT_FIELDS(self)                                                                                         \
    {&self->face,       &self->names,     &self->defaults,   &self->required,   &self->constants,                  \
     &self->state,      &self->group_type, &self->op_type,   &self->array_type, &self->dict,                       \
     &self->last_holder, &self->last_lanes, &self->last_key, &self->last_lane}
#define FRONT_NFIELDS 14

static int front_traverse(FrontObject *self, visitproc visit, void *arg) {
    PyObject **fields[FRONT_NFIELDS] = FRONT_FIELDS(self);
    for (int i = 0; i < FRONT_NFIELDS; i++) Py_VISIT(*fields[i]);
    return 0;
}

static int front_clear(FrontObject *self) {
    PyObject **fields[FRONT_NFIELDS] = FRONT_FIELDS(self);
    for (int i = 0; i < FRONT_NFIELDS; i++) Py_CLEAR(*fields[i]);
    return 0;
}

static void front_dealloc(FrontObject *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
    front_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The index of `name` in `table`, or -1 with an error set. */
static int index_of(const char *const *table, int size, PyObject *name, const char *what) {
    for (int i = 0; i < size; i++)
        if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, table[i]) == 0) return i;
    PyErr_Format(PyExc_ValueError, "a Front's %s %R is none it knows", what, name);
    return -1;
}

/* A parameter's place among `names` from a Python int, or -1 with an error set. */
static int parameter_at(PyObject *place, Py_ssize_t nparams) {
    long at = PyLong_Check(place) ? PyLong_AsLong(place) : -1;
    if (at < 0 || at >= nparams) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "a Front's parameter index %R is out of range", place);
        return -1;
    }
    return (int)at;
}

/* Front(face, names, positional, defaults, required, rules, key, sides, state, group_type, op_type, array_type):
 * rules holds one rule's name per parameter; key holds (kind, constant or parameter index) pairs; sides holds the
 * indexes of the lane's input and output. */
static int front_init(FrontObject *self, PyObject *args, PyObject *kwds) {
    PyObject *face, *names, *defaults, *required, *rules, *key, *sides, *state, *group_type, *op_type, *array_type;
    Py_ssize_t positional;
    if (self->face != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Front is made once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OO!nO!OO!O!O!O!O!O!O!", &face, &PyTuple_Type, &names, &positional, &PyTuple_Type,
                          &defaults, &required, &PyTuple_Type, &rules, &PyTuple_Type, &key, &PyTuple_Type, &sides,
                          &PyDict_Type, &state, &PyType_Type, &group_type, &PyType_Type, &op_type, &PyType_Type,
                          &array_type))
        return -1;
    Py_ssize_t nparams = PyTuple_GET_SIZE(names), nitems = PyTuple_GET_SIZE(key);
    if (nparams > MOST_PARAMETERS || nitems > MOST_ITEMS || PyTuple_GET_SIZE(defaults) != nparams ||
        PyTuple_GET_SIZE(rules) != nparams || PyTuple_GET_SIZE(sides) != 2 || positional > nparams ||
        !PyCallable_Check(face)) {
        PyErr_SetString(PyExc_ValueError, "a Front's face, names, defaults, rules, key or sides do not fit together");
        return -1;
    }
    int group = -1;
    for (Py_ssize_t i = 0; i < nparams; i++) {
        int rule = index_of(RULE_NAMES, RULES, PyTuple_GET_ITEM(rules, i), "rule");
        if (rule < 0) return -1;
        self->rules[i] = (signed char)rule;
        if (rule == GROUP) group = (int)i;
    }
    PyObject *constants = PyTuple_New(nitems);
    if (!constants) return -1;
    for (Py_ssize_t i = 0; i < nitems; i++) {
        PyObject *item = PyTuple_GET_ITEM(key, i);
        int kind = PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2
                       ? index_of(KIND_NAMES, KINDS, PyTuple_GET_ITEM(item, 0), "key item kind")
                       : (PyErr_SetString(PyExc_ValueError, "a Front's key items are (kind, payload) pairs"), -1);
        int at = kind == CONSTANT ? 0 : kind > 0 ? parameter_at(PyTuple_GET_ITEM(item, 1), nparams) : -1;
        if (at < 0) {
            Py_DECREF(constants);
            return -1;
        }
        self->kinds[i] = (signed char)kind;
        self->params[i] = (signed char)at;
        PyTuple_SET_ITEM(constants, i, Py_NewRef(kind == CONSTANT ? PyTuple_GET_ITEM(item, 1) : Py_None));
    }
    int input = parameter_at(PyTuple_GET_ITEM(sides, 0), nparams);
    int output = input < 0 ? -1 : parameter_at(PyTuple_GET_ITEM(sides, 1), nparams);
    if (input < 0 || output < 0 || group < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a Front needs a parameter whose rule is 'group'");
        Py_DECREF(constants);
        return -1;
    }
    self->face = Py_NewRef(face);
    self->names = Py_NewRef(names);
    self->defaults = Py_NewRef(defaults);
    self->required = Py_NewRef(required);
    self->constants = constants;
    self->state = Py_NewRef(state);
    self->group_type = Py_NewRef(group_type);
    self->op_type = Py_NewRef(op_type);
    self->array_type = Py_NewRef(array_type);
    self->positional = positional;
    self->nparams = nparams;
    self->nitems = nitems;
    self->input = input;
    self->output = output;
    self->group = group;
    return 0;
}

/* The place of keyword `name` among the parameters, or -1. */
static Py_ssize_t place_of(FrontObject *self, PyObject *name) {
    for (Py_ssize_t i = 0; i < self->nparams; i++)
        if (PyTuple_GET_ITEM(self->names, i) == name) return i;
    for (Py_ssize_t i = 0; i < self->nparams; i++)
        if (PyUnicode_Compare(PyTuple_GET_ITEM(self->names, i), name) == 0) return i;
    PyErr_Clear();
    return -1;
}

/* 1 once `values` holds every parameter (borrowed) as the face would bind them; 0 for a call the face must bind
 * (too many positions, a keyword unknown or given twice, a required parameter left out): it raises as Python does. */
static int bind(FrontObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **values) {
    if (nargs > self->positional) return 0;
    for (Py_ssize_t i = 0; i < nargs; i++) values[i] = args[i];
    Py_ssize_t nkeywords = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkeywords; k++) {
        Py_ssize_t at = place_of(self, PyTuple_GET_ITEM(kwnames, k));
        if (at < 0 || values[at]) return 0;
        values[at] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < self->nparams; i++) {
        if (!values[i]) values[i] = PyTuple_GET_ITEM(self->defaults, i);
        if (values[i] == self->required) return 0;
    }
    return 1;
}

static int allowed(FrontObject *self, int rule, PyObject *value) {
    switch (rule) {
    case IS_NONE: return value == Py_None;
    case IS_FALSE: return value == Py_False;
    case ROOT: return value == Py_None || PyLong_CheckExact(value); /* 1.0 == 1, but only an int is a rank */
    case LISTED: return value == Py_None || PyList_CheckExact(value) || PyTuple_CheckExact(value);
    case ARRAY: return (PyObject *)Py_TYPE(value) == self->array_type;
    case OP: return (PyObject *)Py_TYPE(value) == self->op_type;
    default: return 1;
    }
}

/* What holds the lanes of `group` (api/state.lanes_of): the runtime for the world, else the group; borrowed, and
 * NULL when none offers lanes, an error set or not. */
static PyObject *holder_of(FrontObject *self, PyObject *group) {
    if (group == Py_None) {
        PyObject *runtime = PyDict_GetItemWithError(self->state, RUNTIME_NAME);
        return runtime == Py_None ? NULL : runtime;
    }
    return (PyObject *)Py_TYPE(group) == self->group_type ? group : NULL;
}

/* The lanes `holder` holds, a new reference; NULL when none, an error set or not. */
static PyObject *lanes_of(FrontObject *self, PyObject *holder) {
    if (holder == self->last_holder) return Py_NewRef(self->last_lanes);
    PyObject *group = (PyObject *)Py_TYPE(holder) == self->group_type ? Py_NewRef(holder)
                                                                       : PyObject_GetAttr(holder, WORLD_NAME);
    PyObject *lanes = group ? PyObject_GetAttr(group, LANES_NAME) : NULL;
    Py_XDECREF(group);
    if (lanes && !PyDict_CheckExact(lanes)) Py_CLEAR(lanes);
    return lanes;
}

/* Item `i` of the face's lane key for the call, a new reference; NULL with an error set. */
static PyObject *item_of(FrontObject *self, PyObject **values, Py_ssize_t i) {
    PyObject *value = values[self->params[i]];
    switch (self->kinds[i]) {
    case CONSTANT: return Py_NewRef(PyTuple_GET_ITEM(self->constants, i));
    case VALUE: return Py_NewRef(value);
    case DTYPE: return PyObject_GetAttr(value, DTYPE_NAME);
    case SHAPE: return PyObject_GetAttr(value, SHAPE_NAME);
    default: {
        int empty = PyObject_Not(value);
        return empty < 0 ? NULL : Py_NewRef(empty ? Py_True : Py_False);
    }
    }
}

/* The face's lane key for the call, a new reference; NULL with an error set. */
static PyObject *key_of(FrontObject *self, PyObject **values) {
    PyObject *key = PyTuple_New(self->nitems);
    for (Py_ssize_t i = 0; key && i < self->nitems; i++) {
        PyObject *item = item_of(self, values, i);
        if (!item) Py_CLEAR(key);
        else PyTuple_SET_ITEM(key, i, item);
    }
    return key;
}

/* 1 when an exact array's dtype or shape (`kind`) is `last`, read from the array's fields: `array.dtype` is the
 * array's descr itself, and `array.shape` a new tuple of its dimensions. 0 when item_of must say. */
static int same_in_fields(FrontObject *self, PyObject *value, int kind, PyObject *last) {
    if ((PyObject *)Py_TYPE(value) != self->array_type) return 0;
    ArrayFields *array = (ArrayFields *)value;
    if (kind == DTYPE) return array->descr == last;
    if (kind != SHAPE || !PyTuple_CheckExact(last) || PyTuple_GET_SIZE(last) != array->nd) return 0;
    for (int d = 0; d < array->nd; d++) {
        PyObject *extent = PyTuple_GET_ITEM(last, d);
        if (!PyLong_CheckExact(extent) || PyLong_AsSsize_t(extent) != array->dimensions[d]) {
            if (PyErr_Occurred()) PyErr_Clear(); /* an extent too large for an index is no array's */
            return 0;
        }
    }
    return 1;
}

/* 1 when the call's key is the last call's, read item by item without building it; 0 when not; -1 with an error
 * set. */
static int same_as_last(FrontObject *self, PyObject **values) {
    for (Py_ssize_t i = 0; i < self->nitems; i++) {
        int kind = self->kinds[i];
        PyObject *value = values[self->params[i]], *last = PyTuple_GET_ITEM(self->last_key, i);
        if (kind == CONSTANT || (kind == VALUE && value == last) || same_in_fields(self, value, kind, last)) continue;
        PyObject *item = item_of(self, values, i);
        int same = !item ? -1 : item == last ? 1 : PyObject_RichCompareBool(item, last, Py_EQ);
        Py_XDECREF(item);
        if (same <= 0) return same;
    }
    return 1;
}

/* Makes (holder, lanes, key, lane) the last call's, all NULL to forget it. The four change together, before the old
 * ones go: letting one go may run Python code, and another thread's call must not see half of a change. */
static void remember(FrontObject *self, PyObject *holder, PyObject *lanes, PyObject *key, PyObject *lane) {
    PyObject *old[4] = {self->last_holder, self->last_lanes, self->last_key, self->last_lane};
    self->last_holder = Py_XNewRef(holder);
    self->last_lanes = Py_XNewRef(lanes);
    self->last_key = Py_XNewRef(key);
    self->last_lane = Py_XNewRef(lane);
    for (int i = 0; i < 4; i++) Py_XDECREF(old[i]);
}

/* The lane for the call in `lanes`, found by `holder`, a new reference; NULL when none, an error set or not. */
static PyObject *lane_for(FrontObject *self, PyObject *holder, PyObject *lanes, PyObject **values) {
    if (lanes == self->last_lanes) {
        int same = same_as_last(self, values);
        if (same) return same < 0 ? NULL : Py_NewRef(self->last_lane);
    }
    PyObject *key = key_of(self, values);
    PyObject *lane = key ? Py_XNewRef(PyDict_GetItemWithError(lanes, key)) : NULL; /* held: a group may clear them */
    if (lane) remember(self, holder, lanes, key, lane);
    Py_XDECREF(key);
    return lane;
}

/* 1 once a lane ran the call; 0 when none may, before anything moved; -1 with an error set. */
static int run_on_lane(FrontObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *values[MOST_PARAMETERS] = {NULL};
    if (!bind(self, args, nargs, kwnames, values)) return 0;
    for (Py_ssize_t i = 0; i < self->nparams; i++)
        if (!allowed(self, self->rules[i], values[i])) return 0;
    PyObject *holder = holder_of(self, values[self->group]);
    if (!holder) remember(self, NULL, NULL, NULL, NULL); /* the world is gone: let its runtime go */
    PyObject *lanes = holder ? lanes_of(self, holder) : NULL;
    if (!lanes) return declined();
    PyObject *lane = lane_for(self, holder, lanes, values);
    Py_DECREF(lanes);
    if (!lane) return declined();
    PyObject *ran = run_lane(lane, values[self->input], values[self->output]);
    if (ran == Py_False && lane == self->last_lane) remember(self, NULL, NULL, NULL, NULL);
    Py_DECREF(lane);
    if (!ran) return -1; /* the call's own failure, raised as the face raises it (group/lanes.py's fallout) */
    int answer = ran == Py_True;
    Py_DECREF(ran);
    return answer;
}

static PyObject *front_call(FrontObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (self->face == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Front is made by Front(...) before it runs");
        return NULL;
    }
    int ran = run_on_lane(self, args, PyVectorcall_NARGS(nargsf), kwnames);
    if (ran) return ran < 0 ? NULL : Py_NewRef(Py_None);
    return PyObject_Vectorcall(self->face, args, nargsf, kwnames);
}

static PyObject *front_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    FrontObject *self = (FrontObject *)type->tp_alloc(type, 0);
    if (self) self->vectorcall = (vectorcallfunc)front_call;
    return (PyObject *)self;
}

/* As a staticmethod's: a front in a class is its face, not a method, and inspect and pydoc read it as a routine. */
static PyObject *front_get(PyObject *self, PyObject *instance, PyObject *owner) { return Py_NewRef(self); }

static PyObject *front_repr(FrontObject *self) {
    return self->face ? PyUnicode_FromFormat("<front of %R>", self->face) : PyUnicode_FromString("<Front>");
}

/* Pickled by name, as the function it stands for is: the module's attribute of the face's name is this front. */
static PyObject *front_reduce(FrontObject *self, PyObject *unused) {
    if (!self->face) {
        PyErr_SetString(PyExc_TypeError, "a Front made by Front(...) is pickled by its face's name");
        return NULL;
    }
    return PyObject_GetAttrString(self->face, "__qualname__");
}

static PyMethodDef front_methods[] = {
    {"__reduce__", (PyCFunction)front_reduce, METH_NOARGS, "the face's name: pickle finds the front by it"},
    {NULL},
};

static PyGetSetDef front_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

static PyTypeObject FrontType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "meshcomm.native._core.Front",
    .tp_basicsize = sizeof(FrontObject),
    .tp_dealloc = (destructor)front_dealloc,
    .tp_vectorcall_offset = offsetof(FrontObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)front_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A face of the API: a blocking call on numpy arrays runs on the group's lane; the face runs the rest.",
    .tp_traverse = (traverseproc)front_traverse,
    .tp_clear = (inquiry)front_clear,
    .tp_methods = front_methods,
    .tp_getset = front_getset,
    .tp_dictoffset = offsetof(FrontObject, dict),
    .tp_weaklistoffset = offsetof(FrontObject, weakrefs),
    .tp_descr_get = front_get,
    .tp_init = (initproc)front_init,
    .tp_new = front_new,
};

int add_front_type(PyObject *module) {
    const char *names[] = {"dtype", "shape", "_runtime", "world", "lanes"};
    PyObject **interned[] = {&DTYPE_NAME, &SHAPE_NAME, &RUNTIME_NAME, &WORLD_NAME, &LANES_NAME};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*interned[i] = PyUnicode_InternFromString(names[i]))) return -1;
    return add_type(module, "Front", &FrontType);
}
