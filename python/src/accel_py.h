// The accel Python extension (_accel): shared declarations. Written against
// CPython's limited API (abi3, Python >= 3.9): heap types from specs, no
// access to object internals.
//
// Lifetime model (python/README.md, "Lifetimes"):
//  - Every object holds a strong reference to its Runtime; the Runtime keeps
//    an intrusive list of its live objects (child_t) so that Runtime.close()
//    can release every handle. An object whose handle is gone raises
//    accel.ClosedError instead of touching freed memory.
//  - What Python does not own (a DLPack tensor numpy holds, a memoryview)
//    keeps the C runtime alive through core_t's count: the accel runtime is
//    destroyed when the Runtime is closed and the last such export is gone.
#ifndef ACCEL_PY_H_
#define ACCEL_PY_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>
#include <stdbool.h>

#include "accel/accel.h"

// Py_buffer and the buffer slots are in the limited API from 3.11; their
// layout has not changed since 3.0, and heap types accept the slots from
// 3.9 on (bpo-40724), so an abi3 module for 3.9 declares them itself.
#if defined(Py_LIMITED_API) && Py_LIMITED_API + 0 < 0x030b0000
typedef struct {
  void *buf;
  PyObject *obj;
  Py_ssize_t len;
  Py_ssize_t itemsize;
  int readonly;
  int ndim;
  char *format;
  Py_ssize_t *shape;
  Py_ssize_t *strides;
  Py_ssize_t *suboffsets;
  void *internal;
} Py_buffer;
#define PyBUF_WRITABLE 0x0001
#define PyBUF_FORMAT 0x0004
#define PyBUF_ND 0x0008
#endif
#ifndef Py_NewRef
static inline PyObject *apy_new_ref(PyObject *o) {
  Py_INCREF(o);
  return o;
}
#define Py_NewRef(o) apy_new_ref((PyObject *)(o))
#endif
// METH_FASTCALL | METH_KEYWORDS: arguments arrive as an array, keywords as
// a tuple of names, with no tuple or dict built per call (the hot calls:
// __dlpack__, Stream.synchronize). The flag is in the limited API from
// 3.10; CPython has called builtin methods this way since 3.7, so the 3.9
// abi3 module declares it itself.
#ifndef METH_FASTCALL
#define METH_FASTCALL 0x0080
#endif
#ifndef Py_bf_getbuffer
#define Py_bf_getbuffer 1
#define Py_bf_releasebuffer 2
#endif

// ---------------------------------------------------------------------------
// Errors (module.c)
// ---------------------------------------------------------------------------

// Raises the accel.Error subclass of |status| with accel_last_error() and
// returns NULL.
PyObject *apy_raise(accel_status_t status);
// As apy_raise, returning -1 (for int-returning slots).
int apy_raise_int(accel_status_t status);
// Raises accel.ClosedError: "<what> is closed (<why>)".
PyObject *apy_closed(const char *what, const char *why);

// ---------------------------------------------------------------------------
// Runtime core and the child list (runtime.c)
// ---------------------------------------------------------------------------

// The C runtime, shared by the Runtime object and by every export Python
// does not own. Destroyed when its count reaches 0.
typedef struct core {
  accel_runtime_t *runtime;
  _Atomic long refs;
} core_t;

void core_retain(core_t *core);
// May destroy the runtime (joins its threads): call without the GIL held
// when a runtime's worker could need it.
void core_release(core_t *core);

struct RuntimeObject;

// A Runtime's live object. |drop| releases the object's handle (once; the
// object stays a valid Python object that raises ClosedError).
typedef struct child {
  struct child *prev;
  struct child *next;
  void (*drop)(struct child *child);
  // 0: dropped in Runtime.close()'s first pass (streams, which drain);
  // 1: in the second (everything else).
  int pass;
} child_t;

typedef struct RuntimeObject {
  PyObject_HEAD
  core_t *core;       // NULL once closed
  child_t children;   // list head (a sentinel)
  // Every live Runtime, for closing them all at interpreter exit.
  struct RuntimeObject *live_prev;
  struct RuntimeObject *live_next;
} RuntimeObject;

// Closes every live Runtime (the atexit hook of the accel package).
PyObject *apy_close_all_runtimes(PyObject *module, PyObject *unused);

// Live DLPack exports and buffer-protocol views, of every runtime.
extern _Atomic long apy_live_exports;

void child_link(RuntimeObject *rt, child_t *child, void (*drop)(child_t *));
void child_unlink(child_t *child);
// Frees a heap-type object and drops its type's reference.
void apy_dealloc_heap(PyObject *self);
// A new object of heap type |type| (zeroed), or NULL.
PyObject *apy_alloc(PyTypeObject *type);

#define APY_CONTAINER(ptr, type, member) \
  ((type *)((char *)(ptr) - offsetof(type, member)))

// Releases the GIL around |stmt| (every wait, copy and enqueue).
#define APY_NOGIL(stmt)                           \
  do {                                            \
    PyThreadState *apy_ts__ = PyEval_SaveThread(); \
    stmt;                                         \
    PyEval_RestoreThread(apy_ts__);               \
  } while (0)

// ---------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------

typedef struct DeviceObject {
  PyObject_HEAD
  RuntimeObject *rt;  // strong
  child_t link;
  accel_device_t *device;  // borrowed from the runtime; NULL once closed
} DeviceObject;

typedef struct StreamObject {
  PyObject_HEAD
  RuntimeObject *rt;
  child_t link;
  accel_stream_t *stream;
  PyObject *device;  // DeviceObject
} StreamObject;

typedef struct EventObject {
  PyObject_HEAD
  RuntimeObject *rt;
  child_t link;
  accel_event_t *event;
} EventObject;

typedef struct SemaphoreObject {
  PyObject_HEAD
  RuntimeObject *rt;
  child_t link;
  accel_semaphore_t *semaphore;
} SemaphoreObject;

typedef struct BufferObject {
  PyObject_HEAD
  RuntimeObject *rt;
  child_t link;
  accel_buffer_t *buffer;  // one reference; NULL once freed or closed
  PyObject *device;        // DeviceObject
  // The stream that last wrote or read it through Python: __dlpack__'s
  // producer stream (a strong reference, or NULL).
  PyObject *last_stream;
  bool read_only;
  // The typed view: DLPack dtype, shape and strides (elements), and the
  // byte offset of element 0. ndim -1: untyped (uint8 over every byte).
  accel_dl_dtype_t dtype;
  int32_t ndim;
  uint64_t offset_bytes;
  int64_t shape[ACCEL_DLPACK_MAX_NDIM];
  int64_t strides[ACCEL_DLPACK_MAX_NDIM];
} BufferObject;

typedef struct ExecutableObject {
  PyObject_HEAD
  RuntimeObject *rt;
  child_t link;
  accel_executable_t *executable;
  PyObject *device;
} ExecutableObject;

typedef struct KernelObject {
  PyObject_HEAD
  RuntimeObject *rt;
  child_t link;
  accel_kernel_t *kernel;  // one reference
  PyObject *device;
  uint32_t binding_count;
  uint32_t constants_size;
} KernelObject;

extern PyTypeObject *apy_RuntimeType;
extern PyTypeObject *apy_DeviceType;
extern PyTypeObject *apy_StreamType;
extern PyTypeObject *apy_EventType;
extern PyTypeObject *apy_SemaphoreType;
extern PyTypeObject *apy_BufferType;
extern PyTypeObject *apy_ExecutableType;
extern PyTypeObject *apy_KernelType;
extern PyTypeObject *apy_CommandBufferType;

// Type creation, one per file; each returns 0 or -1 with an exception.
int apy_runtime_types_init(PyObject *module);
int apy_sync_types_init(PyObject *module);
int apy_buffer_type_init(PyObject *module);
int apy_kernel_types_init(PyObject *module);
int apy_command_buffer_type_init(PyObject *module);

// A Device object for |device| of |rt|.
PyObject *apy_device_new(RuntimeObject *rt, accel_device_t *device);
// The live handle of a Device/Stream/Semaphore/Event argument, or NULL with
// TypeError or ClosedError set.
accel_device_t *apy_device_handle(PyObject *obj);
accel_stream_t *apy_stream_handle(PyObject *obj);
accel_semaphore_t *apy_semaphore_handle(PyObject *obj);
accel_buffer_t *apy_buffer_handle(PyObject *obj);

// A Buffer object owning |buffer| (the reference is taken over), untyped.
PyObject *apy_buffer_new(RuntimeObject *rt, PyObject *device,
                         accel_buffer_t *buffer, bool read_only);
// Records |stream| as the stream that last used |buffer_obj|.
void apy_buffer_touch(PyObject *buffer_obj, PyObject *stream);
// accel.from_dlpack (buffer.c).
PyObject *apy_from_dlpack(PyObject *module, PyObject *args, PyObject *kwargs);
// The DLPack dtype called |name| ("float32"), or false with ValueError.
bool apy_dtype_from_name(const char *name, accel_dl_dtype_t *out);
// The name of |dtype| as a new str.
PyObject *apy_dtype_name(accel_dl_dtype_t dtype);

// A launch grid (an int or a sequence of 1 to 3 ints) in |out| (missing
// dimensions 1), or false with an exception (kernel.c).
bool apy_parse_grid(PyObject *grid, uint32_t out[3]);
// Stream.execute (command_buffer.c).
PyObject *apy_stream_execute(PyObject *stream, PyObject *args,
                             PyObject *kwargs);

// Shared helpers: a timeout argument (None: infinite; seconds as a float)
// in ns, or false with an exception.
bool apy_timeout_ns(PyObject *timeout, uint64_t *out_ns);
// A str argument's UTF-8 copy (PyMem_Free it), or NULL with an exception.
char *apy_utf8(PyObject *str);

#endif  // ACCEL_PY_H_
