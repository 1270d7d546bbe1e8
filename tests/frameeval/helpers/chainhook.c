/* chainhook.c - a minimal foreign PEP 523 hook for tests: counts the frames it sees and
 * hands every one to the evaluation function that was current when it was installed. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static _PyFrameEvalFunction previous = NULL;
static Py_ssize_t seen = 0;

static PyObject *
chain_eval(PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag)
{
    seen++;
    return previous(tstate, frame, throwflag);
}

static PyObject *
install(PyObject *module, PyObject *unused)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    previous = _PyInterpreterState_GetEvalFrameFunc(interp);
    _PyInterpreterState_SetEvalFrameFunc(interp, chain_eval);
    Py_RETURN_NONE;
}

static PyObject *
uninstall(PyObject *module, PyObject *unused)
{
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), previous);
    Py_RETURN_NONE;
}

static PyObject *
count(PyObject *module, PyObject *unused)
{
    return PyLong_FromSsize_t(seen);
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, NULL},
    {"uninstall", uninstall, METH_NOARGS, NULL},
    {"count", count, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "chainhook", NULL, -1, methods};

PyMODINIT_FUNC
PyInit_chainhook(void)
{
    return PyModule_Create(&def);
}
