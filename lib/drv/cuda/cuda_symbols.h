// The CUDA driver API entry points the CUDA backend calls: one X-macro list,
// resolved at run time through cuGetProcAddress (cuda_loader.c) so that
// libaccel neither links against libcuda nor needs it to run. The test
// double (tests/cuda/double) implements every entry of this list, so that a
// call the backend starts making without the double knowing it fails to
// link the double.
//
// X(name): |name| is the name cuda.h declares (a macro there may rename it
// to its versioned symbol, e.g. cuStreamWaitValue64 -> _v2); the loader asks
// cuGetProcAddress for the plain name at ACCEL_CUDA_API_VERSION, which gives
// the ABI cuda.h declares for every entry listed here.
#ifndef ACCEL_DRV_CUDA_SYMBOLS_H_
#define ACCEL_DRV_CUDA_SYMBOLS_H_

// The driver API version whose ABI the backend is written against (12.0:
// cuLibraryLoadData and the _v2 stream memory operations). Older drivers are
// reported as "no CUDA devices" with the version found.
#define ACCEL_CUDA_API_VERSION 12000

#define ACCEL_CUDA_SYMBOLS(X)            \
  /* Initialization and errors. */       \
  X(cuInit)                              \
  X(cuDriverGetVersion)                  \
  X(cuGetErrorName)                      \
  X(cuGetErrorString)                    \
  /* Devices and contexts. */            \
  X(cuDeviceGetCount)                    \
  X(cuDeviceGet)                         \
  X(cuDeviceGetName)                     \
  X(cuDeviceTotalMem)                    \
  X(cuDeviceGetAttribute)                \
  X(cuDeviceGetPCIBusId)                 \
  X(cuDevicePrimaryCtxRetain)            \
  X(cuDevicePrimaryCtxRelease)           \
  X(cuCtxSetCurrent)                     \
  X(cuCtxGetStreamPriorityRange)         \
  /* Virtual memory management. */       \
  X(cuMemGetAllocationGranularity)       \
  X(cuMemAddressReserve)                 \
  X(cuMemAddressFree)                    \
  X(cuMemCreate)                         \
  X(cuMemRelease)                        \
  X(cuMemMap)                            \
  X(cuMemUnmap)                          \
  X(cuMemSetAccess)                      \
  X(cuMemExportToShareableHandle)        \
  X(cuMemImportFromShareableHandle)      \
  /* Pinned host memory. */              \
  X(cuMemHostAlloc)                      \
  X(cuMemFreeHost)                       \
  X(cuMemHostGetDevicePointer)           \
  X(cuMemHostRegister)                   \
  X(cuMemHostUnregister)                 \
  /* Streams, stream memory operations, host functions. */ \
  X(cuStreamCreateWithPriority)          \
  X(cuStreamDestroy)                     \
  X(cuStreamSynchronize)                 \
  X(cuStreamQuery)                       \
  X(cuStreamWaitValue64)                 \
  X(cuStreamWriteValue64)                \
  X(cuLaunchHostFunc)                    \
  /* Copies and fills. */                \
  X(cuMemcpyAsync)                       \
  X(cuMemcpy2DAsync)                     \
  X(cuMemcpy3DAsync)                     \
  X(cuMemsetD8Async)                     \
  X(cuMemsetD16Async)                    \
  X(cuMemsetD32Async)                    \
  X(cuMemsetD2D32Async)                  \
  /* Code objects and launches. */       \
  X(cuLibraryLoadData)                   \
  X(cuLibraryUnload)                     \
  X(cuLibraryGetKernel)                  \
  X(cuKernelGetFunction)                 \
  X(cuLaunchKernel)                      \
  /* Graphs: command buffers (cuda_graph.c). */ \
  X(cuGraphCreate)                       \
  X(cuGraphDestroy)                      \
  X(cuGraphAddHostNode)                  \
  X(cuGraphAddMemsetNode)                \
  X(cuGraphAddMemcpyNode)                \
  X(cuGraphAddBatchMemOpNode)            \
  X(cuGraphAddKernelNode)                \
  X(cuGraphInstantiateWithFlags)         \
  X(cuGraphExecDestroy)                  \
  X(cuGraphLaunch)                       \
  X(cuGraphExecHostNodeSetParams)        \
  X(cuGraphExecMemsetNodeSetParams)      \
  X(cuGraphExecMemcpyNodeSetParams)      \
  X(cuGraphExecBatchMemOpNodeSetParams)  \
  X(cuGraphExecKernelNodeSetParams)

#endif  // ACCEL_DRV_CUDA_SYMBOLS_H_
