// Executable and Kernel objects, and launch from Python:
// kernel(stream, grid, *buffers, constants=b"").
#include <string.h>
#include <time.h>

#include "accel_py.h"

PyTypeObject *apy_ExecutableType;
PyTypeObject *apy_KernelType;

static void kernel_drop(child_t *child);

// ---------------------------------------------------------------------------
// Executable
// ---------------------------------------------------------------------------

static void executable_drop(child_t *child) {
  ExecutableObject *self = APY_CONTAINER(child, ExecutableObject, link);
  accel_executable_release(self->executable);
  self->executable = NULL;
}

static PyObject *executable_new(PyTypeObject *type, PyObject *args,
                                PyObject *kwargs) {
  static char *kwlist[] = {"device", "path", NULL};
  PyObject *device, *path_obj;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:Executable", kwlist,
                                   &device, &path_obj)) {
    return NULL;
  }
  accel_device_t *dev = apy_device_handle(device);
  if (dev == NULL) {
    return NULL;
  }
  PyObject *fs = PyOS_FSPath(path_obj);
  char *path = fs != NULL ? apy_utf8(fs) : NULL;
  Py_XDECREF(fs);
  if (path == NULL) {
    return NULL;
  }
  RuntimeObject *rt = ((DeviceObject *)device)->rt;
  accel_executable_t *exe = NULL;
  accel_status_t st;
  APY_NOGIL(st = accel_executable_load_file(rt->core->runtime, dev, path, 0,
                                            &exe));
  PyMem_Free(path);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  ExecutableObject *self = (ExecutableObject *)apy_alloc(type);
  if (self == NULL) {
    accel_executable_release(exe);
    return NULL;
  }
  self->rt = (RuntimeObject *)Py_NewRef(rt);
  self->device = Py_NewRef(device);
  self->executable = exe;
  child_link(rt, &self->link, executable_drop);
  return (PyObject *)self;
}

static void executable_dealloc(PyObject *obj) {
  ExecutableObject *self = (ExecutableObject *)obj;
  child_unlink(&self->link);
  executable_drop(&self->link);
  Py_XDECREF(self->device);
  Py_XDECREF(self->rt);
  apy_dealloc_heap(obj);
}

static accel_executable_t *executable_handle(PyObject *obj) {
  ExecutableObject *e = (ExecutableObject *)obj;
  if (e->executable == NULL) {
    apy_closed("accel.Executable", "its Runtime was closed");
  }
  return e->executable;
}

static PyObject *kernel_wrap(ExecutableObject *exe, accel_kernel_t *k) {
  accel_kernel_info_t info = {.struct_size = sizeof(info)};
  accel_status_t st = accel_kernel_info(k, &info);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  KernelObject *self = (KernelObject *)apy_alloc(apy_KernelType);
  if (self == NULL) {
    return NULL;
  }
  accel_kernel_retain(k);
  self->rt = (RuntimeObject *)Py_NewRef(exe->rt);
  self->device = Py_NewRef(exe->device);
  self->kernel = k;
  self->binding_count = info.binding_count;
  self->constants_size = info.constants_size;
  child_link(self->rt, &self->link, kernel_drop);
  return (PyObject *)self;
}

static PyObject *executable_kernel(PyObject *obj, PyObject *name_obj) {
  accel_executable_t *exe = executable_handle(obj);
  char *name = exe != NULL ? apy_utf8(name_obj) : NULL;
  if (name == NULL) {
    return NULL;
  }
  accel_kernel_t *k = NULL;
  accel_status_t st = accel_executable_kernel(exe, name, &k);
  PyMem_Free(name);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  return kernel_wrap((ExecutableObject *)obj, k);
}

static PyObject *executable_kernels(PyObject *obj, void *closure) {
  accel_executable_t *exe = executable_handle(obj);
  if (exe == NULL) {
    return NULL;
  }
  accel_executable_info_t info = {.struct_size = sizeof(info)};
  accel_status_t st = accel_executable_info(exe, &info);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  PyObject *list = PyList_New(info.kernel_count);
  for (uint32_t i = 0; list != NULL && i < info.kernel_count; ++i) {
    accel_kernel_t *k = NULL;
    accel_kernel_info_t ki = {.struct_size = sizeof(ki)};
    st = accel_executable_kernel_at(exe, i, &k);
    if (st == ACCEL_OK) {
      st = accel_kernel_info(k, &ki);
    }
    PyObject *name = st == ACCEL_OK ? PyUnicode_FromString(ki.name) : apy_raise(st);
    if (name == NULL) {
      Py_CLEAR(list);
      break;
    }
    PyList_SetItem(list, i, name);
  }
  return list;
}

// A weight as a read-only Buffer over the executable's image: typed by its
// dtype, shape and strides for the strided layout, bytes otherwise.
static PyObject *executable_weight(PyObject *obj, PyObject *name_obj) {
  ExecutableObject *self = (ExecutableObject *)obj;
  accel_executable_t *exe = executable_handle(obj);
  char *name = exe != NULL ? apy_utf8(name_obj) : NULL;
  if (name == NULL) {
    return NULL;
  }
  accel_weight_info_t info = {.struct_size = sizeof(info)};
  accel_buffer_t *buf = NULL;
  accel_status_t st = accel_executable_weight(exe, name, &info);
  if (st == ACCEL_OK) {
    st = accel_executable_weight_buffer(exe, name, &buf);
  }
  PyMem_Free(name);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  BufferObject *b =
      (BufferObject *)apy_buffer_new(self->rt, self->device, buf, true);
  accel_dl_dtype_t dtype;
  if (b == NULL || info.layout != ACCEL_WEIGHT_LAYOUT_STRIDED ||
      accel_dlpack_dtype((accel_dtype_t)info.dtype, &dtype) != ACCEL_OK) {
    return (PyObject *)b;  // bytes: a blocked layout or a packed type
  }
  bool strided = false;
  for (uint32_t d = 0; d < info.rank; ++d) {
    strided |= info.strides[d] != 0;
  }
  int64_t c = 1;
  for (int32_t d = (int32_t)info.rank - 1; d >= 0; --d) {
    b->shape[d] = (int64_t)info.shape[d];
    b->strides[d] = strided ? (int64_t)info.strides[d] : c;
    c *= info.shape[d] > 0 ? (int64_t)info.shape[d] : 1;
  }
  b->dtype = dtype;
  b->ndim = (int32_t)info.rank;
  return (PyObject *)b;
}

static PyMethodDef k_executable_methods[] = {
    {"kernel", executable_kernel, METH_O,
     "kernel(name) -> Kernel; accel.NotFoundError if there is none."},
    {"weight", executable_weight, METH_O,
     "weight(name) -> Buffer: the weight, read-only and without a copy\n"
     "(typed by its dtype and shape for the strided layout; its bytes for\n"
     "blocked layouts and packed 4-bit types)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef k_executable_getset[] = {
    {"kernels", executable_kernels, NULL, "The kernels' names.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot k_executable_slots[] = {
    {Py_tp_new, executable_new},
    {Py_tp_dealloc, executable_dealloc},
    {Py_tp_methods, k_executable_methods},
    {Py_tp_getset, k_executable_getset},
    {Py_tp_doc,
     "Executable(device, path): an .axe file loaded for a device (the file\n"
     "is validated in full before any of its code runs)."},
    {0, NULL},
};

static PyType_Spec k_executable_spec = {
    "accel.Executable", sizeof(ExecutableObject), 0, Py_TPFLAGS_DEFAULT,
    k_executable_slots,
};

// ---------------------------------------------------------------------------
// Kernel
// ---------------------------------------------------------------------------

static void kernel_drop(child_t *child) {
  KernelObject *self = APY_CONTAINER(child, KernelObject, link);
  accel_kernel_release(self->kernel);
  self->kernel = NULL;
}

static void kernel_dealloc(PyObject *obj) {
  KernelObject *self = (KernelObject *)obj;
  child_unlink(&self->link);
  kernel_drop(&self->link);
  Py_XDECREF(self->device);
  Py_XDECREF(self->rt);
  apy_dealloc_heap(obj);
}

bool apy_parse_grid(PyObject *grid, uint32_t out[3]) {
  out[0] = out[1] = out[2] = 1;
  if (PyLong_Check(grid)) {
    unsigned long v = PyLong_AsUnsignedLong(grid);
    if (PyErr_Occurred()) {
      return false;
    }
    out[0] = (uint32_t)v;
    return v <= UINT32_MAX || (PyErr_SetString(PyExc_ValueError,
                                               "grid exceeds 2**32-1"), false);
  }
  PyObject *t = PySequence_Tuple(grid);
  if (t == NULL) {
    return false;
  }
  Py_ssize_t n = PyTuple_Size(t);
  if (n < 1 || n > 3) {
    Py_DECREF(t);
    PyErr_SetString(PyExc_ValueError, "grid must have 1 to 3 dimensions");
    return false;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    unsigned long v = PyLong_AsUnsignedLong(PyTuple_GetItem(t, i));
    if (PyErr_Occurred() || v > UINT32_MAX) {
      Py_DECREF(t);
      if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "grid exceeds 2**32-1");
      }
      return false;
    }
    out[i] = (uint32_t)v;
  }
  Py_DECREF(t);
  return true;
}

static PyObject *kernel_call(PyObject *obj, PyObject *args, PyObject *kwargs) {
  KernelObject *self = (KernelObject *)obj;
  if (self->kernel == NULL) {
    return apy_closed("accel.Kernel", "its Runtime was closed");
  }
  Py_ssize_t nargs = PyTuple_Size(args);
  if (nargs < 2) {
    PyErr_SetString(PyExc_TypeError,
                    "kernel(stream, grid, *buffers, constants=b\"\")");
    return NULL;
  }
  PyObject *constants_obj = NULL;
  if (kwargs != NULL) {
    constants_obj = PyDict_GetItemString(kwargs, "constants");  // borrowed
    if (PyDict_Size(kwargs) > (constants_obj != NULL ? 1 : 0)) {
      PyErr_SetString(PyExc_TypeError,
                      "kernel(): the only keyword argument is constants");
      return NULL;
    }
  }
  PyObject *stream_obj = PyTuple_GetItem(args, 0);
  accel_stream_t *s = apy_stream_handle(stream_obj);
  uint32_t grid[3];
  if (s == NULL || !apy_parse_grid(PyTuple_GetItem(args, 1), grid)) {
    return NULL;
  }
  Py_ssize_t nb = nargs - 2;
  if (nb > 256) {
    PyErr_SetString(PyExc_ValueError, "a launch binds at most 256 buffers");
    return NULL;
  }
  accel_launch_binding_t bindings[256];
  for (Py_ssize_t i = 0; i < nb; ++i) {
    PyObject *b = PyTuple_GetItem(args, 2 + i);
    accel_buffer_t *buf = apy_buffer_handle(b);
    if (buf == NULL) {
      return NULL;
    }
    bindings[i] = (accel_launch_binding_t){.buffer = buf};
  }
  // bytes(constants): bytes itself, or anything with the buffer protocol
  // (a numpy scalar or array).
  PyObject *cbytes = NULL;
  const char *cdata = NULL;
  Py_ssize_t clen = 0;
  if (constants_obj != NULL && constants_obj != Py_None) {
    cbytes = PyObject_Bytes(constants_obj);
    if (cbytes == NULL || PyBytes_AsStringAndSize(cbytes, (char **)&cdata, &clen) < 0) {
      Py_XDECREF(cbytes);
      return NULL;
    }
  }
  accel_launch_desc_t desc = {
      .struct_size = sizeof(desc),
      .workgroup_count = {grid[0], grid[1], grid[2]},
      .binding_count = (uint32_t)nb,
      .constants_size = (uint32_t)clen,
      .bindings = bindings,
      .constants = cdata,
  };
  // Enqueueing never blocks on device work (include/accel/stream.h), so
  // the GIL stays held: dropping and taking it back would cost more than
  // the enqueue.
  accel_status_t st = accel_launch(s, self->kernel, &desc);
  Py_XDECREF(cbytes);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  for (Py_ssize_t i = 0; i < nb; ++i) {
    apy_buffer_touch(PyTuple_GetItem(args, 2 + i), stream_obj);
  }
  return Py_NewRef(Py_None);
}

static PyObject *kernel_name(PyObject *obj, void *closure) {
  KernelObject *self = (KernelObject *)obj;
  if (self->kernel == NULL) {
    return apy_closed("accel.Kernel", "its Runtime was closed");
  }
  accel_kernel_info_t info = {.struct_size = sizeof(info)};
  accel_status_t st = accel_kernel_info(self->kernel, &info);
  return st == ACCEL_OK ? PyUnicode_FromString(info.name) : apy_raise(st);
}

static PyObject *kernel_binding_count(PyObject *obj, void *closure) {
  return PyLong_FromUnsignedLong(((KernelObject *)obj)->binding_count);
}

static PyObject *kernel_constants_size(PyObject *obj, void *closure) {
  return PyLong_FromUnsignedLong(((KernelObject *)obj)->constants_size);
}

// The C baseline of `python -m accel.bench`: |iterations| launches of this
// kernel (no bindings, no constants) each followed by a synchronize, timed
// in C with the GIL released; returns the total in ns.
static PyObject *kernel_bench_c_loop(PyObject *obj, PyObject *args) {
  KernelObject *self = (KernelObject *)obj;
  PyObject *stream_obj;
  unsigned long iterations;
  if (!PyArg_ParseTuple(args, "Ok:_bench_c_loop", &stream_obj, &iterations)) {
    return NULL;
  }
  if (self->kernel == NULL) {
    return apy_closed("accel.Kernel", "its Runtime was closed");
  }
  accel_stream_t *s = apy_stream_handle(stream_obj);
  if (s == NULL) {
    return NULL;
  }
  accel_launch_desc_t desc = {.struct_size = sizeof(desc),
                              .workgroup_count = {1, 1, 1}};
  accel_status_t st = ACCEL_OK;
  struct timespec t0, t1;
  PyThreadState *ts = PyEval_SaveThread();
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (unsigned long i = 0; i < iterations && st == ACCEL_OK; ++i) {
    st = accel_launch(s, self->kernel, &desc);
    if (st == ACCEL_OK) {
      st = accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  PyEval_RestoreThread(ts);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  return PyLong_FromLongLong((long long)(t1.tv_sec - t0.tv_sec) * 1000000000ll +
                             (t1.tv_nsec - t0.tv_nsec));
}

static PyMethodDef k_kernel_methods[] = {
    {"_bench_c_loop", kernel_bench_c_loop, METH_VARARGS,
     "_bench_c_loop(stream, iterations) -> ns: the C baseline of\n"
     "python -m accel.bench (launch + synchronize, in C)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef k_kernel_getset[] = {
    {"name", kernel_name, NULL, "The kernel's name.", NULL},
    {"binding_count", kernel_binding_count, NULL, "Declared bindings.", NULL},
    {"constants_size", kernel_constants_size, NULL,
     "Bytes of constants a launch passes.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot k_kernel_slots[] = {
    {Py_tp_dealloc, kernel_dealloc},
    {Py_tp_call, kernel_call},
    {Py_tp_methods, k_kernel_methods},
    {Py_tp_getset, k_kernel_getset},
    {Py_tp_doc,
     "A kernel of an Executable. kernel(stream, grid, *buffers,\n"
     "constants=b\"\") enqueues a launch on |stream| (grid: an int or 1-3\n"
     "ints) with the same checks as accel_launch: binding count, sizes and\n"
     "alignment, constants size (bytes(constants) must be exactly\n"
     "constants_size bytes), read-only buffers not written."},
    {0, NULL},
};

static PyType_Spec k_kernel_spec = {
    "accel.Kernel", sizeof(KernelObject), 0, Py_TPFLAGS_DEFAULT,
    k_kernel_slots,
};

int apy_kernel_types_init(PyObject *module) {
  apy_ExecutableType = (PyTypeObject *)PyType_FromSpec(&k_executable_spec);
  apy_KernelType = (PyTypeObject *)PyType_FromSpec(&k_kernel_spec);
  if (apy_ExecutableType == NULL || apy_KernelType == NULL) {
    return -1;
  }
  if (PyModule_AddObject(module, "Executable", Py_NewRef(apy_ExecutableType)) <
          0 ||
      PyModule_AddObject(module, "Kernel", Py_NewRef(apy_KernelType)) < 0) {
    return -1;
  }
  return 0;
}
