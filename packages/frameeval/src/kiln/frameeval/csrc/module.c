/* module.c - kiln.frameeval._C: the Python-facing functions over hook.c and cache.c.
 *
 * Invariants: arguments are type-checked here, so the functions of hook.c and cache.c may
 * assume code objects where they take PyCodeObject *. The module has process-wide state
 * (one code-extra index, one installed evaluation function) and refuses to load in a
 * subinterpreter.
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
    return kiln_set_callback(callback);
}

static PyObject *
m_get_callback(PyObject *module, PyObject *unused)
{
    return kiln_get_callback();
}

static PyObject *
m_add_cache_entry(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
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
    CodeState *state = kiln_code_state_ensure((PyCodeObject *)code);
    if (state == NULL) {
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

    Py_ssize_t n = PyTuple_GET_SIZE(state->entries);
    PyObject *entries = PyTuple_New(n + 1);
    if (entries == NULL) {
        Py_DECREF(entry);
        return NULL;
    }
    PyTuple_SET_ITEM(entries, 0, Py_NewRef(entry));
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(entries, i + 1, Py_NewRef(PyTuple_GET_ITEM(state->entries, i)));
    }
    Py_SETREF(state->entries, entries);
    return (PyObject *)entry;
}

static PyObject *
m_get_cache_entries(PyObject *module, PyObject *code)
{
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
    if (expect_code(code, "code") || kiln_mark_skip((PyCodeObject *)code) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
m_is_skipped(PyObject *module, PyObject *code)
{
    if (expect_code(code, "code")) {
        return NULL;
    }
    CodeState *state = kiln_code_state((PyCodeObject *)code);
    return PyBool_FromLong(state != NULL && state->skip);
}

static PyObject *
m_reset(PyObject *module, PyObject *unused)
{
    Py_ssize_t n = kiln_reset_all();
    return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

static PyObject *
m_is_installed(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(kiln_hook_installed());
}

static PyObject *
m_active_threads(PyObject *module, PyObject *unused)
{
    return PyLong_FromSsize_t(kiln_active_threads());
}

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
        kiln_cache_init() < 0 || kiln_hook_init() < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "CacheEntry", (PyObject *)&CacheEntry_Type) < 0) {
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
