/* module.c - kiln.frameeval._C: the Python-facing functions over hook.c and cache.c.
 *
 * Invariants: arguments are type-checked here, so the functions of hook.c and cache.c may
 * assume code objects where they take PyCodeObject *. The module has process-wide state
 * (one code-extra index, one installed evaluation function): it refuses to initialize in a
 * subinterpreter, and every function raises RuntimeError when called from one (a legacy
 * subinterpreter gets a copy of an already-imported module without running its init).
 */
#include "frameeval.h"

static int
expect_code(PyObject *obj, const char *what)
{
    if (!PyCode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a code object, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *
m_set_callback(PyObject *module, PyObject *callback)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    return kiln_set_callback(callback);
}

static PyObject *
m_get_callback(PyObject *module, PyObject *unused)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    return kiln_get_callback();
}

static PyObject *
m_add_cache_entry(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "add_cache_entry(code, guard, replacement)");
        return NULL;
    }
    PyObject *code = args[0], *guard = args[1], *replacement = args[2];
    if (expect_code(code, "code") || expect_code(replacement, "replacement")) {
        return NULL;
    }
    if (!PyCallable_Check(guard)) {
        PyErr_SetString(PyExc_TypeError, "guard must be callable");
        return NULL;
    }
    if (code == replacement) {
        PyErr_SetString(PyExc_ValueError, "replacement must be a different code object");
        return NULL;
    }
    if (kiln_check_layout((PyCodeObject *)code, (PyCodeObject *)replacement) < 0 ||
        kiln_mark_skip((PyCodeObject *)replacement) < 0) {
        return NULL;
    }
    CacheEntryObject *entry = PyObject_GC_New(CacheEntryObject, &CacheEntry_Type);
    if (entry == NULL) {
        return NULL;
    }
    entry->guard = Py_NewRef(guard);
    entry->code = Py_NewRef(replacement);
    entry->function = NULL;
    PyObject_GC_Track(entry);
    /* The state is looked up after the last allocation that may run other code; the code
     * object (an argument) keeps it alive. */
    CodeState *state = kiln_code_state_ensure((PyCodeObject *)code);
    if (state == NULL || kiln_prepend_entry(state, (PyObject *)entry) < 0) {
        Py_DECREF(entry);
        return NULL;
    }
    return (PyObject *)entry;
}

static PyObject *
m_get_cache_entries(PyObject *module, PyObject *code)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    if (expect_code(code, "code")) {
        return NULL;
    }
    CodeState *state = kiln_code_state((PyCodeObject *)code);
    if (state == NULL) {
        return PyList_New(0);
    }
    return PySequence_List(state->entries);
}

static PyObject *
m_clear_cache(PyObject *module, PyObject *code)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    if (expect_code(code, "code")) {
        return NULL;
    }
    CodeState *state = kiln_code_state((PyCodeObject *)code);
    if (state == NULL) {
        return PyLong_FromLong(0);
    }
    PyObject *empty = PyTuple_New(0);
    if (empty == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(state->entries);
    state->skip = 0;
    Py_SETREF(state->entries, empty);
    return PyLong_FromSsize_t(n);
}

static PyObject *
m_mark_skip(PyObject *module, PyObject *code)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    if (expect_code(code, "code") || kiln_mark_skip((PyCodeObject *)code) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
m_is_skipped(PyObject *module, PyObject *code)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    if (expect_code(code, "code")) {
        return NULL;
    }
    CodeState *state = kiln_code_state((PyCodeObject *)code);
    return PyBool_FromLong(state != NULL && state->skip);
}

static PyObject *
m_reset(PyObject *module, PyObject *unused)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    Py_ssize_t n = kiln_reset_all();
    return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

static PyObject *
m_is_installed(PyObject *module, PyObject *unused)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    return PyBool_FromLong(kiln_hook_installed());
}

static PyObject *
m_keep_installed(PyObject *module, PyObject *flag)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    int keep = PyObject_IsTrue(flag);
    return keep < 0 ? NULL : PyBool_FromLong(kiln_keep_installed(keep));
}

static PyObject *
m_active_threads(PyObject *module, PyObject *unused)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(kiln_active_threads());
}

/* ------------------------------------------------------------------ callback_set */

/* A context manager written in C on purpose: its __enter__/__exit__ start no Python frame,
 * so the callback it sets never sees (or fails on) the context manager's own code. */
typedef struct {
    PyObject_HEAD
    PyObject *callback;
    PyObject *previous; /* set by __enter__ */
} CallbackSetObject;

static PyObject *
cs_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *callback;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "callback_set() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:callback_set", &callback)) {
        return NULL;
    }
    CallbackSetObject *self = (CallbackSetObject *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->callback = Py_NewRef(callback);
    }
    return (PyObject *)self;
}

static void
cs_dealloc(CallbackSetObject *self)
{
    Py_XDECREF(self->callback);
    Py_XDECREF(self->previous);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
cs_enter(CallbackSetObject *self, PyObject *unused)
{
    if (kiln_check_interpreter() < 0) {
        return NULL;
    }
    if (self->previous != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "callback_set is not reentrant");
        return NULL;
    }
    self->previous = kiln_set_callback(self->callback);
    return self->previous ? Py_NewRef(self) : NULL;
}

static PyObject *
cs_exit(CallbackSetObject *self, PyObject *args)
{
    PyObject *previous = self->previous;
    if (previous == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "callback_set.__exit__ without __enter__");
        return NULL;
    }
    self->previous = NULL;
    PyObject *replaced = kiln_set_callback(previous);
    Py_DECREF(previous);
    if (replaced == NULL) {
        return NULL;
    }
    Py_DECREF(replaced);
    Py_RETURN_FALSE;
}

static PyMethodDef cs_methods[] = {
    {"__enter__", (PyCFunction)cs_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)cs_exit, METH_VARARGS, NULL},
    {NULL},
};

static PyTypeObject CallbackSet_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kiln.frameeval.callback_set",
    .tp_basicsize = sizeof(CallbackSetObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "callback_set(callback)\n\nContext manager: set this thread's callback (a "
              "callable, RUN_ONLY or None) inside the block, restore the previous one after.",
    .tp_new = cs_new,
    .tp_dealloc = (destructor)cs_dealloc,
    .tp_methods = cs_methods,
};

static PyMethodDef methods[] = {
    {"set_callback", m_set_callback, METH_O,
     "set_callback(callback) -> previous\n\nSet this thread's callback: None (off), RUN_ONLY, "
     "or callable(code, L, func) -> None | SKIP | code."},
    {"get_callback", m_get_callback, METH_NOARGS,
     "get_callback() -> this thread's callback (None when off)."},
    {"add_cache_entry", (PyCFunction)(void (*)(void))m_add_cache_entry, METH_FASTCALL,
     "add_cache_entry(code, guard, replacement) -> CacheEntry\n\nPut (guard, replacement) "
     "first in code's cache; marks replacement as skipped."},
    {"get_cache_entries", m_get_cache_entries, METH_O,
     "get_cache_entries(code) -> list of CacheEntry in lookup order (newest first)."},
    {"clear_cache", m_clear_cache, METH_O,
     "clear_cache(code) -> number of entries dropped; also clears code's skip mark."},
    {"mark_skip", m_mark_skip, METH_O, "mark_skip(code): never intercept frames of code."},
    {"is_skipped", m_is_skipped, METH_O, "is_skipped(code) -> bool"},
    {"reset", m_reset, METH_NOARGS,
     "reset() -> number of code objects cleared: drop every cache entry and skip mark."},
    {"is_installed", m_is_installed, METH_NOARGS,
     "is_installed() -> whether kiln's evaluation function is the interpreter's."},
    {"keep_installed", m_keep_installed, METH_O,
     "keep_installed(flag) -> previous flag\n\nWhen true the evaluation function is installed "
     "now and stays installed with no callback set (no install/uninstall per call)."},
    {"active_threads", m_active_threads, METH_NOARGS,
     "active_threads() -> number of threads whose callback is set."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kiln.frameeval._C",
    .m_doc = "The PEP 523 frame hook of kiln (C extension). Use kiln.frameeval instead.",
    .m_size = -1,
    .m_methods = methods,
};

/* A named singleton: SKIP and RUN_ONLY. */
static PyTypeObject Sentinel_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kiln.frameeval._Sentinel",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

/* Make the sentinel *slot once per process and add it to module as `name`. */
static int
add_sentinel(PyObject *module, const char *name, PyObject **slot)
{
    if (*slot == NULL && (*slot = PyObject_New(PyObject, &Sentinel_Type)) == NULL) {
        return -1;
    }
    return PyModule_AddObjectRef(module, name, *slot);
}

static PyObject *
sentinel_repr(PyObject *self)
{
    return PyUnicode_FromString(self == kiln_SKIP ? "kiln.frameeval.SKIP"
                                                  : "kiln.frameeval.RUN_ONLY");
}

PyMODINIT_FUNC
PyInit__C(void)
{
    if (PyInterpreterState_Get() != PyInterpreterState_Main()) {
        PyErr_SetString(PyExc_ImportError,
                        "kiln.frameeval supports the main interpreter only");
        return NULL;
    }
    Sentinel_Type.tp_repr = sentinel_repr;
    if (PyType_Ready(&Sentinel_Type) < 0 || PyType_Ready(&CacheEntry_Type) < 0 ||
        PyType_Ready(&CallbackSet_Type) < 0 ||
        kiln_cache_init() < 0 || kiln_hook_init() < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "CacheEntry", (PyObject *)&CacheEntry_Type) < 0 ||
        PyModule_AddObjectRef(module, "callback_set", (PyObject *)&CallbackSet_Type) < 0) {
        goto error;
    }
    if (add_sentinel(module, "SKIP", &kiln_SKIP) < 0 ||
        add_sentinel(module, "RUN_ONLY", &kiln_RUN_ONLY) < 0) {
        goto error;
    }
    return module;
error:
    Py_DECREF(module);
    return NULL;
}
