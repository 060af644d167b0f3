// The _accel module: the exception hierarchy, counters, the trace recorder,
// and module setup.
#include <stdlib.h>
#include <string.h>

#include "accel_py.h"

static PyObject *g_error;         // accel.Error
static PyObject *g_closed_error;  // accel.ClosedError
static PyObject *g_status_errors[ACCEL_STATUS_COUNT];

// accel.Error's subclasses, one per status, each also deriving from the
// builtin exception a Python caller would catch for it.
typedef struct error_class {
  accel_status_t status;
  const char *name;
  const char *doc;
} error_class_t;

static const error_class_t k_error_classes[] = {
    {ACCEL_ERROR_INVALID_ARGUMENT, "InvalidArgumentError",
     "An argument is wrong (also a ValueError)."},
    {ACCEL_ERROR_OUT_OF_MEMORY, "OutOfMemoryError",
     "Host or device memory is exhausted (also a MemoryError)."},
    {ACCEL_ERROR_NOT_FOUND, "NotFoundError",
     "A named thing does not exist (also a LookupError)."},
    {ACCEL_ERROR_UNSUPPORTED, "UnsupportedError",
     "The backend or build lacks the feature."},
    {ACCEL_ERROR_UNAVAILABLE, "UnavailableError",
     "A backend or service is not reachable right now."},
    {ACCEL_ERROR_NOT_READY, "NotReadyError", "Work has not completed yet."},
    {ACCEL_ERROR_TIMEOUT, "TimeoutError",
     "A wait timed out (also the builtin TimeoutError)."},
    {ACCEL_ERROR_ABORTED, "AbortedError",
     "Work was aborted (a failed command, a stream destroyed)."},
    {ACCEL_ERROR_DEVICE_LOST, "DeviceLostError", "The device failed."},
    {ACCEL_ERROR_FORMAT, "FormatError", "A file or image is malformed."},
    {ACCEL_ERROR_VERSION, "VersionError",
     "A file, kernel or peer needs another version."},
    {ACCEL_ERROR_IO, "IOError", "An I/O call failed (also an OSError)."},
    {ACCEL_ERROR_BUSY, "BusyError", "The object is in use."},
    {ACCEL_ERROR_INTERNAL, "InternalError", "A bug in accel."},
};

static PyObject *builtin_base(accel_status_t status) {
  switch (status) {
    case ACCEL_ERROR_INVALID_ARGUMENT:
      return PyExc_ValueError;
    case ACCEL_ERROR_OUT_OF_MEMORY:
      return PyExc_MemoryError;
    case ACCEL_ERROR_NOT_FOUND:
      return PyExc_LookupError;
    case ACCEL_ERROR_TIMEOUT:
      return PyExc_TimeoutError;
    case ACCEL_ERROR_IO:
      return PyExc_OSError;
    default:
      return NULL;
  }
}

static PyObject *raise_with(PyObject *cls, int status, const char *message) {
  PyObject *exc = PyObject_CallFunction(cls, "s", message);
  if (exc == NULL) {
    return NULL;
  }
  PyObject *code = status >= 0 ? PyLong_FromLong(status) : Py_NewRef(Py_None);
  PyObject *name = PyUnicode_FromString(
      status >= 0 ? accel_status_name((accel_status_t)status) : "closed");
  PyObject *msg = PyUnicode_FromString(message);
  if (code != NULL && name != NULL && msg != NULL) {
    PyObject_SetAttrString(exc, "status", code);
    PyObject_SetAttrString(exc, "status_name", name);
    PyObject_SetAttrString(exc, "message", msg);
  }
  Py_XDECREF(code);
  Py_XDECREF(name);
  Py_XDECREF(msg);
  PyErr_SetObject(cls, exc);
  Py_DECREF(exc);
  return NULL;
}

PyObject *apy_raise(accel_status_t status) {
  PyObject *cls = (unsigned)status < ACCEL_STATUS_COUNT &&
                          g_status_errors[status] != NULL
                      ? g_status_errors[status]
                      : g_error;
  return raise_with(cls, (int)status, accel_last_error());
}

int apy_raise_int(accel_status_t status) {
  apy_raise(status);
  return -1;
}

PyObject *apy_closed(const char *what, const char *why) {
  char message[256];
  snprintf(message, sizeof(message), "%s is closed (%s)", what, why);
  return raise_with(g_closed_error, -1, message);
}

bool apy_timeout_ns(PyObject *timeout, uint64_t *out_ns) {
  if (timeout == NULL || timeout == Py_None) {
    *out_ns = ACCEL_TIMEOUT_INFINITE;
    return true;
  }
  double s = PyFloat_AsDouble(timeout);
  if (s == -1.0 && PyErr_Occurred()) {
    return false;
  }
  if (!(s >= 0)) {
    PyErr_SetString(PyExc_ValueError, "timeout must be None or seconds >= 0");
    return false;
  }
  *out_ns = s >= 1.8e10 ? ACCEL_TIMEOUT_INFINITE : (uint64_t)(s * 1e9);
  return true;
}

char *apy_utf8(PyObject *str) {
  PyObject *bytes = PyUnicode_AsUTF8String(str);
  if (bytes == NULL) {
    return NULL;
  }
  char *src = PyBytes_AsString(bytes);
  char *copy = src != NULL ? PyMem_Malloc(strlen(src) + 1) : NULL;
  if (copy != NULL) {
    strcpy(copy, src);
  } else if (src != NULL) {
    PyErr_NoMemory();
  }
  Py_DECREF(bytes);
  return copy;
}

PyDoc_STRVAR(counters_doc,
             "counters() -> dict\n\n"
             "Every perf counter of every live device and stream, as\n"
             "{scope_name: {counter_name: value}} (\"host:0\",\n"
             "\"host:0/stream0\"; docs/tracing.md lists the counters).");

static PyObject *counters(PyObject *module, PyObject *unused) {
  size_t count = 0;
  accel_counter_t *c = NULL;
  accel_status_t st = accel_counters_snapshot(NULL, 0, &count);
  // Counters can appear between the two calls: grow until they fit.
  while (st == ACCEL_OK) {
    size_t cap = count + 16;
    PyMem_Free(c);
    c = PyMem_Malloc(cap * sizeof(*c));  // PyMem_Calloc: not in 3.9's limited API
    if (c == NULL) {
      return PyErr_NoMemory();
    }
    memset(c, 0, cap * sizeof(*c));
    c[0].struct_size = sizeof(*c);
    st = accel_counters_snapshot(c, cap, &count);
    if (st == ACCEL_OK && count <= cap) {
      break;
    }
  }
  if (st != ACCEL_OK) {
    PyMem_Free(c);
    return apy_raise(st);
  }
  PyObject *out = PyDict_New();
  for (size_t i = 0; out != NULL && i < count; ++i) {
    PyObject *scope = PyDict_GetItemString(out, c[i].scope_name);  // borrowed
    if (scope == NULL) {
      scope = PyDict_New();
      if (scope == NULL || PyDict_SetItemString(out, c[i].scope_name, scope) < 0) {
        Py_XDECREF(scope);
        Py_CLEAR(out);
        break;
      }
      Py_DECREF(scope);
    }
    PyObject *v = PyLong_FromUnsignedLongLong(c[i].value);
    if (v == NULL || PyDict_SetItemString(scope, c[i].name, v) < 0) {
      Py_XDECREF(v);
      Py_CLEAR(out);
      break;
    }
    Py_DECREF(v);
  }
  PyMem_Free(c);
  return out;
}

static PyObject *trace_start(PyObject *module, PyObject *arg) {
  char *path = apy_utf8(arg);
  if (path == NULL) {
    return NULL;
  }
  accel_status_t st = accel_trace_start(path);
  PyMem_Free(path);
  return st == ACCEL_OK ? Py_NewRef(Py_None) : apy_raise(st);
}

static PyObject *trace_stop(PyObject *module, PyObject *unused) {
  accel_status_t st;
  APY_NOGIL(st = accel_trace_stop());
  return st == ACCEL_OK ? Py_NewRef(Py_None) : apy_raise(st);
}

static PyObject *api_version(PyObject *module, PyObject *unused) {
  uint32_t v = accel_api_version();
  return Py_BuildValue("(II)", v >> 16, v & 0xffffu);
}

static PyMethodDef k_methods[] = {
    {"counters", counters, METH_NOARGS, counters_doc},
    {"_trace_start", trace_start, METH_O,
     "_trace_start(path): starts the built-in Perfetto recorder."},
    {"_trace_stop", trace_stop, METH_NOARGS,
     "_trace_stop(): stops the recorder and closes its file."},
    {"_close_all_runtimes", apy_close_all_runtimes, METH_NOARGS,
     "_close_all_runtimes(): closes every live Runtime (at exit)."},
    {"api_version", api_version, METH_NOARGS,
     "api_version() -> (major, minor) of the loaded library."},
    {"from_dlpack", (PyCFunction)(void (*)(void))apy_from_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "from_dlpack(obj, device=None, *, copy=None, stream=None) -> Buffer\n\n"
     "Imports a DLPack tensor (an object with __dlpack__, or a capsule) as\n"
     "a Buffer on |device| (default: the default runtime's device 0):\n"
     "zero-copy where the device can address the memory, a copy otherwise.\n"
     "copy=True always copies; copy=False raises accel.UnsupportedError\n"
     "rather than copy. A capsule can be consumed once."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef k_module = {
    PyModuleDef_HEAD_INIT,
    "_accel",
    "accel's runtime objects (see the accel package for the documented API).",
    -1,
    k_methods,
    NULL, NULL, NULL, NULL,
};

static int add_errors(PyObject *m) {
  g_error = PyErr_NewExceptionWithDoc(
      "accel.Error",
      "Base of every accel failure: .status (the accel_status_t code),\n"
      ".status_name and .message (the runtime's message).",
      NULL, NULL);
  if (g_error == NULL || PyModule_AddObject(m, "Error", Py_NewRef(g_error)) < 0) {
    return -1;
  }
  g_closed_error = PyErr_NewExceptionWithDoc(
      "accel.ClosedError",
      "The object's handle is gone: it was freed or closed, or its Runtime\n"
      "was closed. .status is None.",
      g_error, NULL);
  if (g_closed_error == NULL ||
      PyModule_AddObject(m, "ClosedError", Py_NewRef(g_closed_error)) < 0) {
    return -1;
  }
  for (size_t i = 0; i < sizeof(k_error_classes) / sizeof(k_error_classes[0]);
       ++i) {
    const error_class_t *e = &k_error_classes[i];
    PyObject *extra = builtin_base(e->status);
    PyObject *bases = extra != NULL ? PyTuple_Pack(2, g_error, extra)
                                    : PyTuple_Pack(1, g_error);
    char qualified[64];
    snprintf(qualified, sizeof(qualified), "accel.%s", e->name);
    PyObject *cls = bases != NULL
                        ? PyErr_NewExceptionWithDoc(qualified, e->doc, bases, NULL)
                        : NULL;
    Py_XDECREF(bases);
    if (cls == NULL || PyModule_AddObject(m, e->name, Py_NewRef(cls)) < 0) {
      Py_XDECREF(cls);
      return -1;
    }
    g_status_errors[e->status] = cls;
  }
  return 0;
}

PyMODINIT_FUNC PyInit__accel(void);
PyMODINIT_FUNC PyInit__accel(void) {
  PyObject *m = PyModule_Create(&k_module);
  if (m == NULL) {
    return NULL;
  }
  if (add_errors(m) < 0 || apy_runtime_types_init(m) < 0 ||
      apy_sync_types_init(m) < 0 || apy_buffer_type_init(m) < 0 ||
      apy_kernel_types_init(m) < 0 || apy_command_buffer_type_init(m) < 0 ||
      PyModule_AddIntConstant(m, "TIMEOUT_INFINITE", -1) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
