// Buffer objects: typed views of accel buffers, the DLPack protocol both
// ways (__dlpack__, __dlpack_device__, from_dlpack) and the buffer protocol
// on host-visible memory.
#include <stdlib.h>
#include <string.h>

#include "accel_py.h"

PyTypeObject *apy_BufferType;

// ---------------------------------------------------------------------------
// dtypes: numpy's names for DLPack types
// ---------------------------------------------------------------------------

typedef struct dtype_name {
  const char *name;
  accel_dl_dtype_t dtype;
} dtype_name_t;

static const dtype_name_t k_dtypes[] = {
    {"bool", {ACCEL_DL_BOOL, 8, 1}},
    {"int8", {ACCEL_DL_INT, 8, 1}},
    {"int16", {ACCEL_DL_INT, 16, 1}},
    {"int32", {ACCEL_DL_INT, 32, 1}},
    {"int64", {ACCEL_DL_INT, 64, 1}},
    {"uint8", {ACCEL_DL_UINT, 8, 1}},
    {"uint16", {ACCEL_DL_UINT, 16, 1}},
    {"uint32", {ACCEL_DL_UINT, 32, 1}},
    {"uint64", {ACCEL_DL_UINT, 64, 1}},
    {"float16", {ACCEL_DL_FLOAT, 16, 1}},
    {"float32", {ACCEL_DL_FLOAT, 32, 1}},
    {"float64", {ACCEL_DL_FLOAT, 64, 1}},
    {"bfloat16", {ACCEL_DL_BFLOAT, 16, 1}},
    {"complex64", {ACCEL_DL_COMPLEX, 64, 1}},
    {"complex128", {ACCEL_DL_COMPLEX, 128, 1}},
    {"float8_e4m3fn", {ACCEL_DL_FLOAT8_E4M3FN, 8, 1}},
    {"float8_e5m2", {ACCEL_DL_FLOAT8_E5M2, 8, 1}},
};

bool apy_dtype_from_name(const char *name, accel_dl_dtype_t *out) {
  for (size_t i = 0; i < sizeof(k_dtypes) / sizeof(k_dtypes[0]); ++i) {
    if (strcmp(k_dtypes[i].name, name) == 0) {
      *out = k_dtypes[i].dtype;
      return true;
    }
  }
  PyErr_Format(PyExc_ValueError, "unknown dtype \"%s\"", name);
  return false;
}

PyObject *apy_dtype_name(accel_dl_dtype_t d) {
  for (size_t i = 0; i < sizeof(k_dtypes) / sizeof(k_dtypes[0]); ++i) {
    const accel_dl_dtype_t *k = &k_dtypes[i].dtype;
    if (k->code == d.code && k->bits == d.bits && k->lanes == d.lanes) {
      return PyUnicode_FromString(k_dtypes[i].name);
    }
  }
  return PyUnicode_FromFormat("dlpack(code=%d,bits=%d,lanes=%d)", d.code,
                              d.bits, d.lanes);
}

// ---------------------------------------------------------------------------
// Buffer
// ---------------------------------------------------------------------------

static void buffer_drop(child_t *child) {
  BufferObject *self = APY_CONTAINER(child, BufferObject, link);
  accel_buffer_t *b = self->buffer;
  self->buffer = NULL;
  Py_CLEAR(self->last_stream);
  accel_buffer_release(b);
}

PyObject *apy_buffer_new(RuntimeObject *rt, PyObject *device,
                         accel_buffer_t *buffer, bool read_only) {
  BufferObject *self = (BufferObject *)apy_alloc(apy_BufferType);
  if (self == NULL) {
    accel_buffer_release(buffer);
    return NULL;
  }
  self->rt = (RuntimeObject *)Py_NewRef(rt);
  self->device = Py_NewRef(device);
  self->buffer = buffer;
  self->read_only = read_only;
  self->ndim = -1;
  child_link(rt, &self->link, buffer_drop);
  return (PyObject *)self;
}

static void buffer_dealloc(PyObject *obj) {
  BufferObject *self = (BufferObject *)obj;
  child_unlink(&self->link);
  buffer_drop(&self->link);
  Py_XDECREF(self->device);
  Py_XDECREF(self->rt);
  apy_dealloc_heap(obj);
}

accel_buffer_t *apy_buffer_handle(PyObject *obj) {
  if (!PyObject_TypeCheck(obj, apy_BufferType)) {
    PyErr_SetString(PyExc_TypeError, "expected an accel.Buffer");
    return NULL;
  }
  BufferObject *b = (BufferObject *)obj;
  if (b->buffer == NULL) {
    apy_closed("accel.Buffer", b->rt != NULL && b->rt->core == NULL
                                   ? "its Runtime was closed"
                                   : "Buffer.free() was called");
  }
  return b->buffer;
}

void apy_buffer_touch(PyObject *buffer_obj, PyObject *stream) {
  BufferObject *b = (BufferObject *)buffer_obj;
  if (b->last_stream != stream) {
    PyObject *old = b->last_stream;
    b->last_stream = Py_NewRef(stream);
    Py_XDECREF(old);
  }
}

// The view as an export descriptor (untyped: uint8 over every byte).
static accel_dlpack_export_desc_t buffer_desc(BufferObject *b,
                                              int64_t *scratch_shape) {
  accel_dlpack_export_desc_t d = {
      .struct_size = sizeof(d),
      .flags = b->read_only ? ACCEL_DLPACK_EXPORT_READ_ONLY : 0,
  };
  if (b->ndim < 0) {
    scratch_shape[0] = (int64_t)accel_buffer_size(b->buffer);
    d.dtype = (accel_dl_dtype_t){ACCEL_DL_UINT, 8, 1};
    d.ndim = 1;
    d.shape = scratch_shape;
  } else {
    d.dtype = b->dtype;
    d.ndim = b->ndim;
    d.shape = b->shape;
    d.strides = b->strides;
    d.offset_bytes = b->offset_bytes;
  }
  return d;
}

static PyObject *int64_tuple(const int64_t *v, int32_t n) {
  PyObject *t = PyTuple_New(n);
  for (int32_t i = 0; t != NULL && i < n; ++i) {
    PyObject *x = PyLong_FromLongLong(v[i]);
    if (x == NULL) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SetItem(t, i, x);
  }
  return t;
}

// Reads a sequence of ints into |out| (at most ACCEL_DLPACK_MAX_NDIM).
static int int64_seq(PyObject *seq, const char *what, int64_t *out) {
  PyObject *fast = PySequence_Tuple(seq);
  if (fast == NULL) {
    return -1;
  }
  Py_ssize_t n = PyTuple_Size(fast);
  if (n > ACCEL_DLPACK_MAX_NDIM) {
    Py_DECREF(fast);
    PyErr_Format(PyExc_ValueError, "%s has %zd dimensions (at most %d)", what,
                 n, ACCEL_DLPACK_MAX_NDIM);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[i] = PyLong_AsLongLong(PyTuple_GetItem(fast, i));
    if (out[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return -1;
    }
  }
  Py_DECREF(fast);
  return (int)n;
}

static PyObject *buffer_view(PyObject *obj, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"dtype", "shape", "strides", "offset", NULL};
  const char *dtype_name;
  PyObject *shape_obj = Py_None, *strides_obj = Py_None;
  unsigned long long offset = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|OO$K:view", kwlist,
                                   &dtype_name, &shape_obj, &strides_obj,
                                   &offset)) {
    return NULL;
  }
  BufferObject *self = (BufferObject *)obj;
  accel_buffer_t *buf = apy_buffer_handle(obj);
  accel_dl_dtype_t dtype;
  if (buf == NULL || !apy_dtype_from_name(dtype_name, &dtype)) {
    return NULL;
  }
  int64_t shape[ACCEL_DLPACK_MAX_NDIM], strides[ACCEL_DLPACK_MAX_NDIM];
  int ndim;
  uint64_t elem = (uint64_t)dtype.bits / 8 * dtype.lanes;
  if (shape_obj == Py_None) {
    uint64_t size = accel_buffer_size(buf);
    shape[0] = (int64_t)((size - (offset < size ? offset : size)) / elem);
    ndim = 1;
  } else if ((ndim = int64_seq(shape_obj, "shape", shape)) < 0) {
    return NULL;
  }
  if (strides_obj == Py_None) {
    int64_t c = 1;
    for (int d = ndim - 1; d >= 0; --d) {
      strides[d] = c;
      c *= shape[d] > 0 ? shape[d] : 1;
    }
  } else {
    int n = int64_seq(strides_obj, "strides", strides);
    if (n < 0) {
      return NULL;
    }
    if (n != ndim) {
      PyErr_Format(PyExc_ValueError, "strides has %d entries, shape %d", n,
                   ndim);
      return NULL;
    }
  }
  // The C export validates the view against the buffer (every element
  // inside it): ask it, and drop the trial tensor.
  accel_dlpack_export_desc_t desc = {
      .struct_size = sizeof(desc),
      .offset_bytes = offset,
      .dtype = dtype,
      .ndim = ndim,
      .shape = shape,
      .strides = strides,
  };
  accel_dl_managed_tensor_versioned_t *trial = NULL;
  accel_status_t st = accel_buffer_to_dlpack(buf, &desc, &trial);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  trial->deleter(trial);
  accel_buffer_retain(buf);
  BufferObject *view = (BufferObject *)apy_buffer_new(self->rt, self->device,
                                                      buf, self->read_only);
  if (view == NULL) {
    return NULL;
  }
  view->dtype = dtype;
  view->ndim = ndim;
  view->offset_bytes = offset;
  memcpy(view->shape, shape, sizeof(int64_t) * (size_t)ndim);
  memcpy(view->strides, strides, sizeof(int64_t) * (size_t)ndim);
  if (self->last_stream != NULL) {
    view->last_stream = Py_NewRef(self->last_stream);
  }
  return (PyObject *)view;
}

static PyObject *buffer_free(PyObject *obj, PyObject *unused) {
  BufferObject *self = (BufferObject *)obj;
  child_unlink(&self->link);
  buffer_drop(&self->link);
  return Py_NewRef(Py_None);
}

// ---------------------------------------------------------------------------
// DLPack export
// ---------------------------------------------------------------------------

// What Python adds to the C export: the runtime's core stays alive until
// the consumer lets go of the tensor, even if the Runtime was closed.
typedef struct py_export {
  void *inner_ctx;
  void (*inner_versioned)(accel_dl_managed_tensor_versioned_t *);
  void (*inner_legacy)(accel_dl_managed_tensor_t *);
  core_t *core;
} py_export_t;

static void py_export_done(py_export_t *x) {
  core_t *core = x->core;
  free(x);
  // Relaxed: a statistic for tests.
  atomic_fetch_sub_explicit(&apy_live_exports, 1, memory_order_relaxed);
  core_release(core);
}

static void py_export_versioned_deleter(accel_dl_managed_tensor_versioned_t *t) {
  py_export_t *x = t->manager_ctx;
  t->manager_ctx = x->inner_ctx;
  x->inner_versioned(t);
  py_export_done(x);
}

static void py_export_legacy_deleter(accel_dl_managed_tensor_t *t) {
  py_export_t *x = t->manager_ctx;
  t->manager_ctx = x->inner_ctx;
  x->inner_legacy(t);
  py_export_done(x);
}

static void capsule_versioned_destructor(PyObject *capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    accel_dl_managed_tensor_versioned_t *t =
        PyCapsule_GetPointer(capsule, "dltensor_versioned");
    t->deleter(t);
  }
}

static void capsule_legacy_destructor(PyObject *capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    accel_dl_managed_tensor_t *t = PyCapsule_GetPointer(capsule, "dltensor");
    t->deleter(t);
  }
}

// A copy of the whole buffer on its device, for __dlpack__(copy=True).
static accel_status_t copy_buffer(accel_buffer_t *src, accel_buffer_t **out) {
  accel_device_t *dev = accel_buffer_device(src);
  accel_buffer_desc_t d = {.struct_size = sizeof(d),
                           .size_bytes = accel_buffer_size(src)};
  accel_buffer_t *dst = NULL;
  ACCEL_RETURN_IF_ERROR(accel_buffer_alloc(dev, &d, &dst));
  accel_stream_t *s = NULL;
  accel_status_t st = accel_stream_create(dev, NULL, &s);
  if (st == ACCEL_OK) {
    st = accel_stream_copy(s, dst, 0, src, 0, d.size_bytes);
    if (st == ACCEL_OK) {
      st = accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE);
    }
    accel_stream_destroy(s);
  }
  if (st != ACCEL_OK) {
    accel_buffer_release(dst);
    return st;
  }
  *out = dst;
  return ACCEL_OK;
}

// __dlpack__'s keywords, interned once: numpy calls __dlpack__ with three
// of them on every from_dlpack, and PyArg_ParseTupleAndKeywords (the only
// general parser in the 3.9 limited API) builds a string per keyword per
// call, which with the dict of a METH_KEYWORDS call was most of the
// export's cost.
static PyObject *g_kw[4];
static const char *const k_kw_names[4] = {"stream", "max_version",
                                          "dl_device", "copy"};

static int parse_dlpack_kwargs(Py_ssize_t nargs, PyObject *kwnames,
                               PyObject *const *values, PyObject **out) {
  if (nargs != 0) {
    PyErr_SetString(PyExc_TypeError, "__dlpack__ takes keyword arguments only");
    return -1;
  }
  Py_ssize_t n = kwnames != NULL ? PyTuple_Size(kwnames) : 0;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject *key = PyTuple_GetItem(kwnames, k);
    int found = -1;
    for (int i = 0; i < 4 && found < 0; ++i) {
      if (key == g_kw[i]) {
        found = i;
      }
    }
    for (int i = 0; i < 4 && found < 0; ++i) {
      if (PyUnicode_CompareWithASCIIString(key, k_kw_names[i]) == 0) {
        found = i;
      }
    }
    if (found < 0) {
      PyErr_Format(PyExc_TypeError,
                   "__dlpack__() got an unexpected keyword argument %R", key);
      return -1;
    }
    out[found] = values[k];
  }
  return 0;
}

// A (int, int) tuple argument (PyArg_ParseTuple costs a format parse).
static int int_pair(PyObject *t, const char *what, long *a, long *b) {
  if (!PyTuple_Check(t) || PyTuple_Size(t) != 2) {
    PyErr_Format(PyExc_TypeError, "__dlpack__: %s must be a tuple of two ints",
                 what);
    return -1;
  }
  *a = PyLong_AsLong(PyTuple_GetItem(t, 0));
  *b = PyLong_AsLong(PyTuple_GetItem(t, 1));
  return PyErr_Occurred() != NULL ? -1 : 0;
}

static PyObject *buffer_dlpack(PyObject *obj, PyObject *const *args,
                               Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *kw[4] = {Py_None, Py_None, Py_None, Py_None};
  // The count without PY_VECTORCALL_ARGUMENTS_OFFSET (the top bit).
  Py_ssize_t nargs = nargsf & PY_SSIZE_T_MAX;
  if (parse_dlpack_kwargs(nargs, kwnames, args + nargs, kw) < 0) {
    return NULL;
  }
  PyObject *stream = kw[0], *max_version = kw[1], *dl_device = kw[2],
           *copy = kw[3];
  BufferObject *self = (BufferObject *)obj;
  accel_buffer_t *buf = apy_buffer_handle(obj);
  if (buf == NULL) {
    return NULL;
  }
  if (dl_device != Py_None) {
    long type = 0, id = 0;
    if (int_pair(dl_device, "dl_device", &type, &id) < 0) {
      return NULL;
    }
    accel_dl_device_t own;
    accel_dlpack_device(accel_buffer_device(buf), &own);
    if (type != own.device_type || id != own.device_id) {
      PyErr_Format(PyExc_BufferError,
                   "__dlpack__: cannot export to DLPack device (%ld, %ld); "
                   "the buffer is on (%d, %d)",
                   type, id, own.device_type, own.device_id);
      return NULL;
    }
  }
  int64_t scratch[1];
  accel_dlpack_export_desc_t desc = buffer_desc(self, scratch);
  // The handshake (docs/dlpack.md): None means a host consumer, -1 none.
  if (stream == Py_None) {
    desc.producer_stream = self->last_stream != NULL
                               ? ((StreamObject *)self->last_stream)->stream
                               : NULL;
  } else if (PyObject_TypeCheck(stream, apy_StreamType)) {
    desc.consumer_stream = apy_stream_handle(stream);
    if (desc.consumer_stream == NULL) {
      return NULL;
    }
    desc.producer_stream = self->last_stream != NULL
                               ? ((StreamObject *)self->last_stream)->stream
                               : NULL;
  } else if (!(PyLong_Check(stream) && PyLong_AsLong(stream) == -1)) {
    PyErr_Clear();
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__: stream must be None (host consumer), -1 (no "
                    "synchronization) or an accel.Stream");
    return NULL;
  }
  bool versioned = false;
  if (max_version != Py_None) {
    long major = 0, minor = 0;
    if (int_pair(max_version, "max_version", &major, &minor) < 0) {
      return NULL;
    }
    versioned = major >= 1;
  }
  bool copied = false;
  accel_buffer_t *src = buf;
  if (copy == Py_True) {
    accel_status_t st;
    APY_NOGIL(st = copy_buffer(buf, &src));
    if (st != ACCEL_OK) {
      return apy_raise(st);
    }
    desc.producer_stream = NULL;
    copied = true;
  }
  py_export_t *x = calloc(1, sizeof(*x));
  if (x == NULL) {
    if (copied) {
      accel_buffer_release(src);
    }
    return PyErr_NoMemory();
  }
  accel_status_t st;
  void *tensor = NULL;
  accel_dl_managed_tensor_versioned_t *tv = NULL;
  accel_dl_managed_tensor_t *tl = NULL;
  // The GIL is released only when the export waits for a stream: taking
  // it back costs more than an export that does not wait.
  PyThreadState *ts = desc.producer_stream != NULL ? PyEval_SaveThread() : NULL;
  if (versioned) {
    st = accel_buffer_to_dlpack(src, &desc, &tv);
  } else {
    st = accel_buffer_to_dlpack_legacy(src, &desc, &tl);
  }
  if (ts != NULL) {
    PyEval_RestoreThread(ts);
  }
  if (copied) {
    accel_buffer_release(src);  // the tensor holds its own reference
  }
  if (st != ACCEL_OK) {
    free(x);
    return apy_raise(st);
  }
  x->core = self->rt->core;
  core_retain(x->core);
  // Relaxed: a statistic for tests.
  atomic_fetch_add_explicit(&apy_live_exports, 1, memory_order_relaxed);
  PyObject *capsule;
  if (versioned) {
    x->inner_ctx = tv->manager_ctx;
    x->inner_versioned = tv->deleter;
    tv->manager_ctx = x;
    tv->deleter = py_export_versioned_deleter;
    if (copied) {
      tv->flags |= ACCEL_DL_FLAG_IS_COPIED;
    }
    tensor = tv;
    capsule = PyCapsule_New(tensor, "dltensor_versioned",
                            capsule_versioned_destructor);
    if (capsule == NULL) {
      tv->deleter(tv);
    }
  } else {
    x->inner_ctx = tl->manager_ctx;
    x->inner_legacy = tl->deleter;
    tl->manager_ctx = x;
    tl->deleter = py_export_legacy_deleter;
    tensor = tl;
    capsule = PyCapsule_New(tensor, "dltensor", capsule_legacy_destructor);
    if (capsule == NULL) {
      tl->deleter(tl);
    }
  }
  return capsule;
}

static PyObject *buffer_dlpack_device(PyObject *obj, PyObject *unused) {
  accel_buffer_t *buf = apy_buffer_handle(obj);
  if (buf == NULL) {
    return NULL;
  }
  accel_dl_device_t d;
  accel_status_t st = accel_dlpack_device(accel_buffer_device(buf), &d);
  return st == ACCEL_OK ? Py_BuildValue("(ii)", d.device_type, d.device_id)
                        : apy_raise(st);
}

// ---------------------------------------------------------------------------
// DLPack import
// ---------------------------------------------------------------------------

static PyObject *default_device(void) {
  PyObject *mod = PyImport_ImportModule("accel");
  if (mod == NULL) {
    return NULL;
  }
  PyObject *dev = PyObject_CallMethod(mod, "default_device", NULL);
  Py_DECREF(mod);
  return dev;
}

// obj.__dlpack__(...) asking for the versioned form; producers that predate
// max_version get called without it. The consumer's stream is passed only
// to accel producers: for others it is no stream of theirs (DLPack wants
// None for host memory), and the import waits on it instead.
static PyObject *producer_capsule(PyObject *obj, PyObject *stream) {
  if (!PyObject_TypeCheck(obj, apy_BufferType)) {
    stream = Py_None;
  }
  PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
  if (method == NULL) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "from_dlpack: expected an object with __dlpack__ or a "
                 "DLPack capsule");
    return NULL;
  }
  PyObject *args = PyTuple_New(0);
  PyObject *kwargs = Py_BuildValue("{s:(ii)}", "max_version",
                                   ACCEL_DLPACK_MAJOR_VERSION,
                                   ACCEL_DLPACK_MINOR_VERSION);
  if (args == NULL || kwargs == NULL ||
      (stream != Py_None && PyDict_SetItemString(kwargs, "stream", stream) < 0)) {
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    Py_DECREF(method);
    return NULL;
  }
  PyObject *capsule = PyObject_Call(method, args, kwargs);
  if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    PyDict_DelItemString(kwargs, "max_version");
    capsule = PyObject_Call(method, args, kwargs);
  }
  Py_DECREF(args);
  Py_DECREF(kwargs);
  Py_DECREF(method);
  return capsule;
}

PyObject *apy_from_dlpack(PyObject *module, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"obj", "device", "copy", "stream", NULL};
  PyObject *obj, *device = Py_None, *copy = Py_None, *stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$OO:from_dlpack", kwlist,
                                   &obj, &device, &copy, &stream)) {
    return NULL;
  }
  PyObject *dev_obj = device == Py_None ? default_device() : Py_NewRef(device);
  if (dev_obj == NULL) {
    return NULL;
  }
  PyObject *capsule = NULL, *result = NULL;
  accel_device_t *dev = apy_device_handle(dev_obj);
  accel_dlpack_import_desc_t desc = {.struct_size = sizeof(desc)};
  if (dev == NULL) {
    goto out;
  }
  if (copy == Py_True) {
    desc.flags = ACCEL_DLPACK_IMPORT_COPY;
  } else if (copy == Py_False) {
    desc.flags = ACCEL_DLPACK_IMPORT_NO_COPY;
  } else if (copy != Py_None) {
    PyErr_SetString(PyExc_TypeError, "copy must be None, True or False");
    goto out;
  }
  if (stream != Py_None && (desc.stream = apy_stream_handle(stream)) == NULL) {
    goto out;
  }
  capsule = PyCapsule_CheckExact(obj) ? Py_NewRef(obj)
                                      : producer_capsule(obj, stream);
  if (capsule == NULL) {
    goto out;
  }
  const char *name = PyCapsule_GetName(capsule);
  if (name == NULL) {
    goto out;
  }
  bool versioned = strcmp(name, "dltensor_versioned") == 0;
  if (!versioned && strcmp(name, "dltensor") != 0) {
    if (strncmp(name, "used_", 5) == 0) {
      PyErr_SetString(PyExc_BufferError,
                      "from_dlpack: the DLPack capsule was already consumed");
    } else {
      PyErr_Format(PyExc_BufferError,
                   "from_dlpack: a capsule named \"%s\" is not a DLPack "
                   "tensor",
                   name);
    }
    goto out;
  }
  void *managed = PyCapsule_GetPointer(capsule, name);
  if (managed == NULL) {
    goto out;
  }
  // The metadata is read before the import: a copying import lets go of
  // the producer's tensor.
  const accel_dl_tensor_t *t =
      versioned ? &((accel_dl_managed_tensor_versioned_t *)managed)->dl_tensor
                : &((accel_dl_managed_tensor_t *)managed)->dl_tensor;
  if (t->ndim < 0 || t->ndim > ACCEL_DLPACK_MAX_NDIM) {
    PyErr_Format(PyExc_BufferError, "from_dlpack: ndim %d is outside 0..%d",
                 t->ndim, ACCEL_DLPACK_MAX_NDIM);
    goto out;
  }
  accel_dl_dtype_t dtype = t->dtype;
  int32_t ndim = t->ndim;
  int64_t shape[ACCEL_DLPACK_MAX_NDIM], strides[ACCEL_DLPACK_MAX_NDIM];
  int64_t c = 1;
  for (int32_t d = ndim - 1; d >= 0; --d) {
    shape[d] = t->shape[d];
    strides[d] = t->strides != NULL ? t->strides[d] : c;
    c *= shape[d] > 0 ? shape[d] : 1;
  }
  bool read_only =
      versioned && (((accel_dl_managed_tensor_versioned_t *)managed)->flags &
                    ACCEL_DL_FLAG_READ_ONLY) != 0;
  accel_buffer_t *buf = NULL;
  uint64_t offset = 0;
  accel_status_t st;
  if (versioned) {
    APY_NOGIL(st = accel_buffer_from_dlpack(dev, managed, &desc, &buf, &offset));
  } else {
    APY_NOGIL(st = accel_buffer_from_dlpack_legacy(dev, managed, &desc, &buf,
                                                   &offset));
  }
  if (st != ACCEL_OK) {
    apy_raise(st);
    goto out;
  }
  // The buffer owns the tensor now: the capsule must not delete it.
  PyCapsule_SetName(capsule, versioned ? "used_dltensor_versioned"
                                       : "used_dltensor");
  BufferObject *b = (BufferObject *)apy_buffer_new(
      ((DeviceObject *)dev_obj)->rt, dev_obj, buf, read_only);
  if (b != NULL) {
    b->dtype = dtype;
    b->ndim = ndim;
    b->offset_bytes = offset;
    memcpy(b->shape, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(b->strides, strides, sizeof(int64_t) * (size_t)ndim);
    if (stream != Py_None) {
      b->last_stream = Py_NewRef(stream);
    }
  }
  result = (PyObject *)b;
out:
  Py_XDECREF(capsule);
  Py_DECREF(dev_obj);
  return result;
}

// ---------------------------------------------------------------------------
// The buffer protocol: the bytes of a host-visible buffer
// ---------------------------------------------------------------------------

typedef struct view_hold {
  Py_ssize_t shape[1];
  Py_ssize_t strides[1];
  accel_buffer_t *buffer;  // one reference
  core_t *core;
} view_hold_t;

static int buffer_getbuffer(PyObject *obj, Py_buffer *view, int flags) {
  BufferObject *self = (BufferObject *)obj;
  accel_buffer_t *buf = apy_buffer_handle(obj);
  if (buf == NULL) {
    return -1;
  }
  if ((flags & PyBUF_WRITABLE) != 0 && self->read_only) {
    PyErr_SetString(PyExc_BufferError, "the accel buffer is read-only");
    return -1;
  }
  void *host = NULL;
  accel_status_t st = accel_buffer_host_pointer(buf, &host);
  if (st != ACCEL_OK) {
    PyErr_Format(PyExc_BufferError,
                 "the accel buffer is not host-visible: %s",
                 accel_last_error());
    return -1;
  }
  view_hold_t *hold = PyMem_Malloc(sizeof(*hold));
  if (hold == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  Py_ssize_t n = (Py_ssize_t)accel_buffer_size(buf);
  hold->shape[0] = n;
  hold->strides[0] = 1;
  hold->buffer = buf;
  hold->core = self->rt->core;
  accel_buffer_retain(buf);
  core_retain(hold->core);
  // Relaxed: a statistic for tests.
  atomic_fetch_add_explicit(&apy_live_exports, 1, memory_order_relaxed);
  view->buf = host;
  view->obj = Py_NewRef(obj);
  view->len = n;
  view->itemsize = 1;
  view->readonly = self->read_only;
  view->ndim = 1;
  view->format = (flags & PyBUF_FORMAT) != 0 ? "B" : NULL;
  view->shape = (flags & PyBUF_ND) != 0 ? hold->shape : NULL;
  view->strides = NULL;
  view->suboffsets = NULL;
  view->internal = hold;
  return 0;
}

static void buffer_releasebuffer(PyObject *obj, Py_buffer *view) {
  view_hold_t *hold = view->internal;
  accel_buffer_release(hold->buffer);
  atomic_fetch_sub_explicit(&apy_live_exports, 1, memory_order_relaxed);
  core_release(hold->core);
  PyMem_Free(hold);
}

// ---------------------------------------------------------------------------
// Properties and the type
// ---------------------------------------------------------------------------

static PyObject *buffer_nbytes(PyObject *obj, void *closure) {
  accel_buffer_t *buf = apy_buffer_handle(obj);
  return buf != NULL ? PyLong_FromUnsignedLongLong(accel_buffer_size(buf))
                     : NULL;
}

static PyObject *buffer_address(PyObject *obj, void *closure) {
  accel_buffer_t *buf = apy_buffer_handle(obj);
  return buf != NULL ? PyLong_FromUnsignedLongLong(accel_buffer_address(buf))
                     : NULL;
}

static PyObject *buffer_dtype(PyObject *obj, void *closure) {
  BufferObject *b = (BufferObject *)obj;
  return b->ndim < 0 ? PyUnicode_FromString("uint8") : apy_dtype_name(b->dtype);
}

static PyObject *buffer_shape(PyObject *obj, void *closure) {
  BufferObject *b = (BufferObject *)obj;
  if (b->ndim >= 0) {
    return int64_tuple(b->shape, b->ndim);
  }
  accel_buffer_t *buf = apy_buffer_handle(obj);
  return buf != NULL ? Py_BuildValue("(K)", (unsigned long long)accel_buffer_size(buf))
                     : NULL;
}

static PyObject *buffer_strides(PyObject *obj, void *closure) {
  BufferObject *b = (BufferObject *)obj;
  return b->ndim >= 0 ? int64_tuple(b->strides, b->ndim) : Py_BuildValue("(i)", 1);
}

static PyObject *buffer_offset(PyObject *obj, void *closure) {
  return PyLong_FromUnsignedLongLong(((BufferObject *)obj)->offset_bytes);
}

static PyObject *buffer_readonly(PyObject *obj, void *closure) {
  return PyBool_FromLong(((BufferObject *)obj)->read_only);
}

static PyObject *buffer_device(PyObject *obj, void *closure) {
  return Py_NewRef(((BufferObject *)obj)->device);
}

static PyObject *buffer_repr(PyObject *obj) {
  BufferObject *b = (BufferObject *)obj;
  if (b->buffer == NULL) {
    return PyUnicode_FromString("<accel.Buffer (closed)>");
  }
  PyObject *shape = buffer_shape(obj, NULL), *dtype = buffer_dtype(obj, NULL);
  PyObject *r = shape != NULL && dtype != NULL
                    ? PyUnicode_FromFormat("<accel.Buffer %U %R, %llu bytes%s>",
                                           dtype, shape,
                                           (unsigned long long)accel_buffer_size(b->buffer),
                                           b->read_only ? ", read-only" : "")
                    : NULL;
  Py_XDECREF(shape);
  Py_XDECREF(dtype);
  return r;
}

static PyMethodDef k_buffer_methods[] = {
    {"view", (PyCFunction)(void (*)(void))buffer_view,
     METH_VARARGS | METH_KEYWORDS,
     "view(dtype, shape=None, strides=None, *, offset=0) -> Buffer\n\n"
     "A typed view of the same memory: strides in elements (None: row-major\n"
     "compact), offset in bytes to element 0. Every element must lie in\n"
     "the buffer (accel.InvalidArgumentError otherwise)."},
    {"free", buffer_free, METH_NOARGS,
     "free(): drops this object's reference now (the memory returns when\n"
     "pending work, exports and other views are done with it)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))buffer_dlpack,
     METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None,\n"
     "copy=None) -> PyCapsule\n\n"
     "The DLPack protocol: a versioned capsule when max_version >= (1, 0),\n"
     "else a legacy one. stream=None waits for the stream that last used\n"
     "the buffer (a host consumer); an accel.Stream makes that stream wait\n"
     "instead; -1 skips the handshake. copy=True exports a copy; the view\n"
     "is zero-copy otherwise (copy=False is always honoured)."},
    {"__dlpack_device__", buffer_dlpack_device, METH_NOARGS,
     "(device_type, device_id) of the buffer's memory (kDLCPU = 1)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef k_buffer_getset[] = {
    {"nbytes", buffer_nbytes, NULL, "Bytes of the underlying buffer.", NULL},
    {"address", buffer_address, NULL, "The device address of byte 0.", NULL},
    {"dtype", buffer_dtype, NULL, "The element type's name (\"float32\").", NULL},
    {"shape", buffer_shape, NULL, "The view's shape.", NULL},
    {"strides", buffer_strides, NULL, "The view's strides, in elements.", NULL},
    {"offset", buffer_offset, NULL, "Bytes from byte 0 to element 0.", NULL},
    {"readonly", buffer_readonly, NULL, "True if commands may not write it.",
     NULL},
    {"device", buffer_device, NULL, "The Device.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot k_buffer_slots[] = {
    {Py_tp_dealloc, buffer_dealloc},
    {Py_tp_methods, k_buffer_methods},
    {Py_tp_getset, k_buffer_getset},
    {Py_tp_repr, buffer_repr},
    {Py_bf_getbuffer, buffer_getbuffer},
    {Py_bf_releasebuffer, buffer_releasebuffer},
    {Py_tp_doc,
     "Device memory with a typed view (Device.alloc, accel.asarray,\n"
     "accel.from_dlpack). Supports DLPack and, on host-visible memory, the\n"
     "buffer protocol (its bytes)."},
    {0, NULL},
};

static PyType_Spec k_buffer_spec = {
    "accel.Buffer", sizeof(BufferObject), 0, Py_TPFLAGS_DEFAULT,
    k_buffer_slots,
};

int apy_buffer_type_init(PyObject *module) {
  for (int i = 0; i < 4; ++i) {
    g_kw[i] = PyUnicode_InternFromString(k_kw_names[i]);
    if (g_kw[i] == NULL) {
      return -1;
    }
  }
  apy_BufferType = (PyTypeObject *)PyType_FromSpec(&k_buffer_spec);
  if (apy_BufferType == NULL) {
    return -1;
  }
  return PyModule_AddObject(module, "Buffer", Py_NewRef(apy_BufferType));
}
