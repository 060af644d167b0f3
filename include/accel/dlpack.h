// DLPack 1.x exchange: accel's own definitions of the DLPack ABI (the
// versioned DLManagedTensorVersioned of DLPack 1.0/1.1 and the legacy
// unversioned DLManagedTensor), and the two directions of exchange between an
// accel buffer and another framework's tensor (numpy, PyTorch, JAX, CuPy).
//
// The types below are binary-compatible with dlpack/dlpack.h 1.1 (the layout
// is pinned with static_asserts) but carry accel names, so that this header
// can be included next to any copy of dlpack.h. A consumer that has a
// `DLManagedTensorVersioned *` may pass it where an
// `accel_dl_managed_tensor_versioned_t *` is asked for, and back.
//
// Devices (accel_dlpack_device): a buffer of the host device is kDLCPU
// (device_id 0: host memory is one address space); a buffer of a CUDA device
// is kDLCUDA with the CUDA ordinal (pinned host buffers of a CUDA device are
// kDLCUDAHost); any other device is kDLExtDev with the accel device index.
//
// The stream handshake (docs/dlpack.md): DLPack's rule is that the producer
// makes the data safe to use in the consumer's stream before handing it over.
//  - Export (accel produces): accel_dlpack_export_desc_t.producer_stream is
//    the accel stream whose submitted work writes the buffer. With a
//    consumer_stream (an accel stream) the consumer stream is made to wait
//    for that work (an event; the host does not block); without one the
//    consumer is the host and the producer stream is synchronized before the
//    tensor is returned.
//  - Import (accel consumes): accel_dlpack_import_desc_t.ready_semaphore and
//    ready_value say when the producer's data is ready. With a stream the
//    stream waits for it (later work on the stream is ordered after the
//    producer); without one the host waits before the call returns.
#ifndef ACCEL_DLPACK_H_
#define ACCEL_DLPACK_H_

#include "accel/base.h"
#include "accel/device.h"
#include "accel/executable.h"
#include "accel/memory.h"
#include "accel/semaphore.h"
#include "accel/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

// The DLPack version these definitions follow (DLPACK_MAJOR/MINOR_VERSION).
// A versioned tensor accel produces carries it; one accel consumes must have
// major ACCEL_DLPACK_MAJOR_VERSION (any minor: later minors only add).
#define ACCEL_DLPACK_MAJOR_VERSION 1
#define ACCEL_DLPACK_MINOR_VERSION 1

// The most dimensions accel exports or imports.
#define ACCEL_DLPACK_MAX_NDIM 32

// DLPackVersion.
typedef struct accel_dl_version {
  // Major version: a tensor of another major must not be read.
  uint32_t major;
  // Minor version: additions only.
  uint32_t minor;
} accel_dl_version_t;

// DLDeviceType (the values DLPack assigns).
typedef enum accel_dl_device_type {
  ACCEL_DL_CPU = 1,
  ACCEL_DL_CUDA = 2,
  ACCEL_DL_CUDA_HOST = 3,
  ACCEL_DL_OPENCL = 4,
  ACCEL_DL_VULKAN = 7,
  ACCEL_DL_METAL = 8,
  ACCEL_DL_VPI = 9,
  ACCEL_DL_ROCM = 10,
  ACCEL_DL_ROCM_HOST = 11,
  ACCEL_DL_EXT_DEV = 12,
  ACCEL_DL_CUDA_MANAGED = 13,
  ACCEL_DL_ONEAPI = 14,
} accel_dl_device_type_t;

// DLDevice.
typedef struct accel_dl_device {
  // accel_dl_device_type_t (DLPack stores the C enum: 4 bytes).
  int32_t device_type;
  // The device's ordinal within its type; 0 for kDLCPU.
  int32_t device_id;
} accel_dl_device_t;

// DLDataTypeCode.
typedef enum accel_dl_dtype_code {
  ACCEL_DL_INT = 0,
  ACCEL_DL_UINT = 1,
  ACCEL_DL_FLOAT = 2,
  ACCEL_DL_OPAQUE_HANDLE = 3,
  ACCEL_DL_BFLOAT = 4,
  ACCEL_DL_COMPLEX = 5,
  ACCEL_DL_BOOL = 6,
  ACCEL_DL_FLOAT8_E4M3FN = 10,
  ACCEL_DL_FLOAT8_E5M2 = 12,
} accel_dl_dtype_code_t;

// DLDataType.
typedef struct accel_dl_dtype {
  // accel_dl_dtype_code_t.
  uint8_t code;
  // Bits per lane (8, 16, 32, 64; accel exchanges whole bytes only).
  uint8_t bits;
  // Lanes per element (1 for scalars; 0 is invalid).
  uint16_t lanes;
} accel_dl_dtype_t;

// DLTensor: a borrowed view of memory.
typedef struct accel_dl_tensor {
  // Base pointer: a host pointer for kDLCPU/kDLCUDAHost, the device address
  // otherwise. Element 0 lies at data + byte_offset.
  void *data;
  // Where |data| lives.
  accel_dl_device_t device;
  // Dimensions (0 for a scalar).
  int32_t ndim;
  // Element type.
  accel_dl_dtype_t dtype;
  // |ndim| extents.
  int64_t *shape;
  // |ndim| strides in elements; NULL means row-major compact (accel never
  // produces NULL for ndim > 0).
  int64_t *strides;
  // Bytes from |data| to element 0.
  uint64_t byte_offset;
} accel_dl_tensor_t;

// DLManagedTensor: the legacy (pre-1.0, unversioned) owner of a DLTensor.
typedef struct accel_dl_managed_tensor {
  // The tensor.
  accel_dl_tensor_t dl_tensor;
  // The producer's context (opaque to the consumer).
  void *manager_ctx;
  // Called once by the consumer when it no longer needs the tensor (NULL:
  // nothing to free).
  void (*deleter)(struct accel_dl_managed_tensor *self);
} accel_dl_managed_tensor_t;

// DLManagedTensorVersioned flags.
#define ACCEL_DL_FLAG_READ_ONLY (1ull << 0)
#define ACCEL_DL_FLAG_IS_COPIED (1ull << 1)
#define ACCEL_DL_FLAG_IS_SUBBYTE_TYPE_PADDED (1ull << 2)

// DLManagedTensorVersioned: the DLPack 1.x owner of a DLTensor.
typedef struct accel_dl_managed_tensor_versioned {
  // The DLPack version the producer followed.
  accel_dl_version_t version;
  // The producer's context (opaque to the consumer).
  void *manager_ctx;
  // Called once by the consumer when it no longer needs the tensor (NULL:
  // nothing to free).
  void (*deleter)(struct accel_dl_managed_tensor_versioned *self);
  // ACCEL_DL_FLAG_* bits.
  uint64_t flags;
  // The tensor.
  accel_dl_tensor_t dl_tensor;
} accel_dl_managed_tensor_versioned_t;

#if !defined(__cplusplus) && UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(accel_dl_device_t) == 8, "DLDevice");
_Static_assert(sizeof(accel_dl_dtype_t) == 4, "DLDataType");
_Static_assert(sizeof(accel_dl_tensor_t) == 48, "DLTensor");
_Static_assert(offsetof(accel_dl_tensor_t, ndim) == 16, "DLTensor.ndim");
_Static_assert(offsetof(accel_dl_tensor_t, shape) == 24, "DLTensor.shape");
_Static_assert(offsetof(accel_dl_tensor_t, byte_offset) == 40,
               "DLTensor.byte_offset");
_Static_assert(sizeof(accel_dl_managed_tensor_t) == 64, "DLManagedTensor");
_Static_assert(sizeof(accel_dl_managed_tensor_versioned_t) == 80,
               "DLManagedTensorVersioned");
_Static_assert(offsetof(accel_dl_managed_tensor_versioned_t, dl_tensor) == 32,
               "DLManagedTensorVersioned.dl_tensor");
#endif

// Export flags (accel_dlpack_export_desc_t.flags).
enum accel_dlpack_export_flag_bits {
  ACCEL_DLPACK_EXPORT_NONE = 0,
  // Mark the tensor read-only (ACCEL_DL_FLAG_READ_ONLY). Buffers that are
  // read-only (an executable's weights, read-only imports) always are.
  ACCEL_DLPACK_EXPORT_READ_ONLY = 1u << 0,
};

// What accel_buffer_to_dlpack exports: a strided view of a buffer range.
typedef struct accel_dlpack_export_desc {
  // sizeof(accel_dlpack_export_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_dlpack_export_flag_bits; 0 for none.
  uint32_t flags;
  // Byte offset of element 0 from the buffer's start (0: the first byte).
  uint64_t offset_bytes;
  // Element type; bits must be a multiple of 8 and lanes at least 1.
  accel_dl_dtype_t dtype;
  // Dimensions, 0 to ACCEL_DLPACK_MAX_NDIM (0: a scalar).
  int32_t ndim;
  // |ndim| extents, each >= 0 (copied). May be NULL only when ndim is 0.
  const int64_t *shape;
  // |ndim| strides in elements (copied; negative allowed); NULL means
  // row-major compact. Every element addressed must lie inside the buffer.
  const int64_t *strides;
  // The accel stream whose submitted work produces the buffer's contents;
  // NULL when nothing is in flight (or the caller orders it itself).
  accel_stream_t *producer_stream;
  // The consumer's accel stream; NULL means the host consumes the tensor
  // (producer_stream is then synchronized before the call returns).
  accel_stream_t *consumer_stream;
} accel_dlpack_export_desc_t;

// Import flags (accel_dlpack_import_desc_t.flags).
enum accel_dlpack_import_flag_bits {
  ACCEL_DLPACK_IMPORT_NONE = 0,
  // Always copy into a new buffer, even where the device could address the
  // producer's memory.
  ACCEL_DLPACK_IMPORT_COPY = 1u << 0,
  // Never copy: fail with ACCEL_ERROR_UNSUPPORTED where the device cannot
  // address the producer's memory (Python's copy=False).
  ACCEL_DLPACK_IMPORT_NO_COPY = 1u << 1,
};

// How accel_buffer_from_dlpack takes a tensor.
typedef struct accel_dlpack_import_desc {
  // sizeof(accel_dlpack_import_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_dlpack_import_flag_bits; 0 for none.
  uint32_t flags;
  // The consumer's stream: waits for |ready_semaphore| and runs a copy, if
  // one is needed; NULL: the host waits and copies.
  accel_stream_t *stream;
  // Signalled by the producer to |ready_value| when its data is ready; NULL
  // when the data is ready now.
  accel_semaphore_t *ready_semaphore;
  // The value of |ready_semaphore| that means ready.
  uint64_t ready_value;
} accel_dlpack_import_desc_t;

// Returns in |*out_dtype| the DLPack type of accel |dtype|.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL |out_dtype| or an unknown dtype.
// ACCEL_ERROR_UNSUPPORTED: a packed sub-byte type (i4, u4), which accel does
//   not exchange through DLPack.
// Thread-safe.
ACCEL_API accel_status_t accel_dlpack_dtype(accel_dtype_t dtype,
                                            accel_dl_dtype_t *out_dtype);

// Returns in |*out_device| the DLPack device of |device| (see the top of
// this header for the mapping).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// Thread-safe.
ACCEL_API accel_status_t accel_dlpack_device(const accel_device_t *device,
                                             accel_dl_device_t *out_device);

// Exports a view of |buffer| as a DLPack 1.x tensor (version
// ACCEL_DLPACK_MAJOR/MINOR_VERSION), after the stream handshake of
// desc->producer_stream and desc->consumer_stream (top of this header).
// Strides are always filled (for ndim > 0) and in elements; data is the
// buffer's base and byte_offset desc->offset_bytes.
// Ownership: on success the caller owns |*out_tensor| and must call its
// deleter exactly once; the tensor holds its own reference to |buffer| (the
// caller may release its own at once). The deleter may run on any thread,
// but before the buffer's runtime is destroyed.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, struct_size too small, ndim
//   out of range, a negative extent, a dtype that is not whole bytes or has
//   no lanes, or an element outside the buffer (the message names the
//   dimension and the byte range), a consumer stream on another device.
// ACCEL_ERROR_OUT_OF_MEMORY: the tensor cannot be allocated.
// The producer stream's stored error if it failed (host consumer).
// Thread-safe.
ACCEL_API accel_status_t accel_buffer_to_dlpack(
    accel_buffer_t *buffer, const accel_dlpack_export_desc_t *desc,
    accel_dl_managed_tensor_versioned_t **out_tensor);

// accel_buffer_to_dlpack for consumers that only know the legacy
// unversioned DLManagedTensor. Same rules and errors, plus:
// ACCEL_ERROR_UNSUPPORTED: the view would be read-only (a read-only buffer
//   or ACCEL_DLPACK_EXPORT_READ_ONLY), which the legacy form cannot say.
// Thread-safe.
ACCEL_API accel_status_t accel_buffer_to_dlpack_legacy(
    accel_buffer_t *buffer, const accel_dlpack_export_desc_t *desc,
    accel_dl_managed_tensor_t **out_tensor);

// Makes a buffer of |device| over a DLPack tensor's memory: without copying
// where |device| can address it (a kDLCPU tensor on a host-visible device,
// or the device's own DLPack device), by copying otherwise (or with
// ACCEL_DLPACK_IMPORT_COPY). The buffer spans every byte the tensor
// addresses; |*out_offset_bytes| (may be NULL) receives the offset of
// element 0 in it. A tensor flagged READ_ONLY gives a read-only buffer
// (commands that write it are refused).
// Ownership: on success the buffer owns |tensor|: its deleter is called
// exactly once, when the last reference to the buffer is gone (zero-copy),
// or once the copy has completed (copy; then the call does not keep it). On
// failure |tensor| is untouched and still the caller's.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, struct_size too small, both
//   copy flags, ndim out of range, a negative extent, a dtype that is not
//   whole bytes, a NULL data pointer for a non-empty tensor, a stream of
//   another device.
// ACCEL_ERROR_VERSION: a versioned tensor whose major is not
//   ACCEL_DLPACK_MAJOR_VERSION.
// ACCEL_ERROR_UNSUPPORTED: ACCEL_DLPACK_IMPORT_NO_COPY and the memory cannot
//   be addressed by |device|; or memory of a device accel cannot read.
// ACCEL_ERROR_OUT_OF_MEMORY: the buffer (or the copy) cannot be allocated.
// The stream's or semaphore's stored error if the handshake fails.
// Thread-safe.
ACCEL_API accel_status_t accel_buffer_from_dlpack(
    accel_device_t *device, accel_dl_managed_tensor_versioned_t *tensor,
    const accel_dlpack_import_desc_t *desc, accel_buffer_t **out_buffer,
    uint64_t *out_offset_bytes);

// accel_buffer_from_dlpack for a legacy unversioned tensor (treated as
// writable). Same rules and errors, without the version check.
// Thread-safe.
ACCEL_API accel_status_t accel_buffer_from_dlpack_legacy(
    accel_device_t *device, accel_dl_managed_tensor_t *tensor,
    const accel_dlpack_import_desc_t *desc, accel_buffer_t **out_buffer,
    uint64_t *out_offset_bytes);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_DLPACK_H_
