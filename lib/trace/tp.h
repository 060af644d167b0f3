// LTTng-UST tracepoint provider `accel` (compiled only with LTTng-UST).
// Fields are ids and scalars (stream, device and queue ids are the trace ids
// of accel_counter_t.scope_id), plus copied strings for names and messages;
// never dereferenced pointers. Addresses are device addresses (hex).
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER accel

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "trace/tp.h"


#if !defined(ACCEL_TRACE_TP_H_) || \
    defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define ACCEL_TRACE_TP_H_

#include <lttng/tracepoint.h>
#include <stdint.h>

#include "trace/tensor_summary.h"

LTTNG_UST_TRACEPOINT_ENUM(accel, cmd_kind,
  LTTNG_UST_TP_ENUM_VALUES(
    lttng_ust_field_enum_value("host_call", 0)
    lttng_ust_field_enum_value("fill", 1)
    lttng_ust_field_enum_value("copy", 2)
    lttng_ust_field_enum_value("signal", 3)
    lttng_ust_field_enum_value("wait", 4)
    lttng_ust_field_enum_value("launch", 5)
    lttng_ust_field_enum_value("execute", 6)))

LTTNG_UST_TRACEPOINT_ENUM(accel, copy_direction,
  LTTNG_UST_TP_ENUM_VALUES(
    lttng_ust_field_enum_value("d2d", 0)
    lttng_ust_field_enum_value("h2d", 1)
    lttng_ust_field_enum_value("d2h", 2)))

LTTNG_UST_TRACEPOINT_ENUM(accel, status,
  LTTNG_UST_TP_ENUM_VALUES(
    lttng_ust_field_enum_value("ok", 0)
    lttng_ust_field_enum_value("invalid_argument", 1)
    lttng_ust_field_enum_value("out_of_memory", 2)
    lttng_ust_field_enum_value("not_found", 3)
    lttng_ust_field_enum_value("unsupported", 4)
    lttng_ust_field_enum_value("unavailable", 5)
    lttng_ust_field_enum_value("not_ready", 6)
    lttng_ust_field_enum_value("timeout", 7)
    lttng_ust_field_enum_value("aborted", 8)
    lttng_ust_field_enum_value("device_lost", 9)
    lttng_ust_field_enum_value("format", 10)
    lttng_ust_field_enum_value("version", 11)
    lttng_ust_field_enum_value("io", 12)
    lttng_ust_field_enum_value("busy", 13)
    lttng_ust_field_enum_value("internal", 14)))

LTTNG_UST_TRACEPOINT_EVENT(accel, runtime_create,
  // |cmdline|: the process's command line (LTTng's procname context holds
  // at most 15 characters), passed in: the probes live in their own
  // library (tp.c), which calls nothing of libaccel.
  LTTNG_UST_TP_ARGS(uint64_t, runtime, uint32_t, device_count,
                    const char *, cmdline),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer_hex(uint64_t, runtime, runtime)
    lttng_ust_field_integer(uint32_t, device_count, device_count)
    lttng_ust_field_string(cmdline, cmdline)))

LTTNG_UST_TRACEPOINT_EVENT(accel, runtime_destroy,
  LTTNG_UST_TP_ARGS(uint64_t, runtime),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer_hex(uint64_t, runtime, runtime)))

LTTNG_UST_TRACEPOINT_EVENT(accel, device_open,
  LTTNG_UST_TP_ARGS(uint32_t, device, const char *, name, uint64_t, host_ns,
                    uint64_t, device_ns),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, device, device)
    lttng_ust_field_string(name, name)
    lttng_ust_field_integer(uint64_t, clock_host_ns, host_ns)
    lttng_ust_field_integer(uint64_t, clock_device_ns, device_ns)))

LTTNG_UST_TRACEPOINT_EVENT(accel, device_close,
  LTTNG_UST_TP_ARGS(uint32_t, device),
  LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint32_t, device, device)))

LTTNG_UST_TRACEPOINT_EVENT(accel, stream_create,
  LTTNG_UST_TP_ARGS(uint32_t, stream, uint32_t, device, const char *, name),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, stream, stream)
    lttng_ust_field_integer(uint32_t, device, device)
    lttng_ust_field_string(name, name)))

LTTNG_UST_TRACEPOINT_EVENT(accel, stream_destroy,
  LTTNG_UST_TP_ARGS(uint32_t, stream),
  LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint32_t, stream, stream)))

LTTNG_UST_TRACEPOINT_EVENT(accel, buffer_alloc,
  LTTNG_UST_TP_ARGS(uint32_t, device, uint64_t, address, uint64_t, size,
                    uint32_t, allocator),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, device, device)
    lttng_ust_field_integer_hex(uint64_t, address, address)
    lttng_ust_field_integer(uint64_t, size, size)
    lttng_ust_field_integer(uint32_t, allocator, allocator)))

LTTNG_UST_TRACEPOINT_EVENT(accel, buffer_free,
  LTTNG_UST_TP_ARGS(uint32_t, device, uint64_t, address, uint64_t, size),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, device, device)
    lttng_ust_field_integer_hex(uint64_t, address, address)
    lttng_ust_field_integer(uint64_t, size, size)))

// |flags| is the command's flags (the copy direction for copies).
LTTNG_UST_TRACEPOINT_EVENT_CLASS(accel, cmd_class,
  LTTNG_UST_TP_ARGS(uint32_t, stream, uint32_t, kind, uint32_t, flags,
                    uint64_t, seq, uint64_t, bytes),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, stream, stream)
    lttng_ust_field_enum(accel, cmd_kind, uint32_t, kind, kind)
    lttng_ust_field_integer(uint32_t, flags, flags)
    lttng_ust_field_integer(uint64_t, seq, seq)
    lttng_ust_field_integer(uint64_t, bytes, bytes)))

// Emitted once the queue accepted the command (its seq is known only then),
// so the worker may already have started it; |enqueue_ns| is the
// CLOCK_MONOTONIC time before the command was handed to the queue.
LTTNG_UST_TRACEPOINT_EVENT(accel, cmd_enqueue,
  LTTNG_UST_TP_ARGS(uint32_t, stream, uint32_t, kind, uint32_t, flags,
                    uint64_t, seq, uint64_t, bytes, uint64_t, enqueue_ns),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, stream, stream)
    lttng_ust_field_enum(accel, cmd_kind, uint32_t, kind, kind)
    lttng_ust_field_integer(uint32_t, flags, flags)
    lttng_ust_field_integer(uint64_t, seq, seq)
    lttng_ust_field_integer(uint64_t, bytes, bytes)
    lttng_ust_field_integer(uint64_t, enqueue_ns, enqueue_ns)))

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(accel, cmd_class, accel, cmd_start,
  LTTNG_UST_TP_ARGS(uint32_t, stream, uint32_t, kind, uint32_t, flags,
                    uint64_t, seq, uint64_t, bytes))

LTTNG_UST_TRACEPOINT_EVENT(accel, cmd_end,
  LTTNG_UST_TP_ARGS(uint32_t, stream, uint32_t, kind, uint64_t, seq,
                    uint32_t, status),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, stream, stream)
    lttng_ust_field_enum(accel, cmd_kind, uint32_t, kind, kind)
    lttng_ust_field_integer(uint64_t, seq, seq)
    lttng_ust_field_enum(accel, status, uint32_t, status, status)))

LTTNG_UST_TRACEPOINT_EVENT(accel, launch_begin,
  LTTNG_UST_TP_ARGS(uint32_t, stream, uint64_t, seq, const char *, kernel,
                    uint32_t, grid_x, uint32_t, grid_y, uint32_t, grid_z),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, stream, stream)
    lttng_ust_field_integer(uint64_t, seq, seq)
    lttng_ust_field_string(kernel, kernel)
    lttng_ust_field_integer(uint32_t, grid_x, grid_x)
    lttng_ust_field_integer(uint32_t, grid_y, grid_y)
    lttng_ust_field_integer(uint32_t, grid_z, grid_z)))

LTTNG_UST_TRACEPOINT_EVENT(accel, launch_end,
  LTTNG_UST_TP_ARGS(uint32_t, stream, uint64_t, seq, uint32_t, status),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, stream, stream)
    lttng_ust_field_integer(uint64_t, seq, seq)
    lttng_ust_field_enum(accel, status, uint32_t, status, status)))

LTTNG_UST_TRACEPOINT_EVENT_CLASS(accel, copy_class,
  LTTNG_UST_TP_ARGS(uint32_t, engine, uint32_t, direction, uint64_t, bytes,
                    uint64_t, seq),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, engine, engine)
    lttng_ust_field_enum(accel, copy_direction, uint32_t, direction, direction)
    lttng_ust_field_integer(uint64_t, bytes, bytes)
    lttng_ust_field_integer(uint64_t, seq, seq)))

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(accel, copy_class, accel, copy_submit,
  LTTNG_UST_TP_ARGS(uint32_t, engine, uint32_t, direction, uint64_t, bytes,
                    uint64_t, seq))
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(accel, copy_class, accel, copy_start,
  LTTNG_UST_TP_ARGS(uint32_t, engine, uint32_t, direction, uint64_t, bytes,
                    uint64_t, seq))
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(accel, copy_class, accel, copy_end,
  LTTNG_UST_TP_ARGS(uint32_t, engine, uint32_t, direction, uint64_t, bytes,
                    uint64_t, seq))

LTTNG_UST_TRACEPOINT_EVENT_CLASS(accel, semaphore_class,
  LTTNG_UST_TP_ARGS(uint32_t, device, uint64_t, semaphore, uint64_t, value,
                    uint32_t, status),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, device, device)
    lttng_ust_field_integer_hex(uint64_t, semaphore, semaphore)
    lttng_ust_field_integer(uint64_t, value, value)
    lttng_ust_field_enum(accel, status, uint32_t, status, status)))

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(accel, semaphore_class, accel,
  semaphore_signal,
  LTTNG_UST_TP_ARGS(uint32_t, device, uint64_t, semaphore, uint64_t, value,
                    uint32_t, status))
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(accel, semaphore_class, accel,
  semaphore_wait,
  LTTNG_UST_TP_ARGS(uint32_t, device, uint64_t, semaphore, uint64_t, value,
                    uint32_t, status))
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(accel, semaphore_class, accel,
  semaphore_wake,
  LTTNG_UST_TP_ARGS(uint32_t, device, uint64_t, semaphore, uint64_t, value,
                    uint32_t, status))

LTTNG_UST_TRACEPOINT_EVENT(accel, event_record,
  LTTNG_UST_TP_ARGS(uint64_t, event, uint32_t, stream, uint64_t, value),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer_hex(uint64_t, event, event)
    lttng_ust_field_integer(uint32_t, stream, stream)
    lttng_ust_field_integer(uint64_t, value, value)))

LTTNG_UST_TRACEPOINT_EVENT(accel, event_complete,
  LTTNG_UST_TP_ARGS(uint64_t, event, uint32_t, stream, uint64_t, device_ns,
                    uint64_t, host_ns),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer_hex(uint64_t, event, event)
    lttng_ust_field_integer(uint32_t, stream, stream)
    lttng_ust_field_integer(uint64_t, device_ns, device_ns)
    lttng_ust_field_integer(uint64_t, host_ns, host_ns)))

LTTNG_UST_TRACEPOINT_EVENT(accel, error,
  LTTNG_UST_TP_ARGS(uint32_t, status, const char *, message),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_enum(accel, status, uint32_t, status, status)
    lttng_ust_field_string(message, message)))

LTTNG_UST_TRACEPOINT_EVENT(accel, kernel_message,
  LTTNG_UST_TP_ARGS(uint32_t, kind, const char *, kernel, uint32_t, group_x,
                    uint32_t, group_y, uint32_t, group_z, const char *, text),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, kind, kind)
    lttng_ust_field_string(kernel, kernel)
    lttng_ust_field_integer(uint32_t, group_x, group_x)
    lttng_ust_field_integer(uint32_t, group_y, group_y)
    lttng_ust_field_integer(uint32_t, group_z, group_z)
    lttng_ust_field_string(text, text)))

LTTNG_UST_TRACEPOINT_EVENT(accel, stream_fail,
  LTTNG_UST_TP_ARGS(uint32_t, stream, uint64_t, seq, uint32_t, status,
                    const char *, message),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, stream, stream)
    lttng_ust_field_integer(uint64_t, seq, seq)
    lttng_ust_field_enum(accel, status, uint32_t, status, status)
    lttng_ust_field_string(message, message)))

// A summary of one typed output binding of a launch (ACCEL_TRACE_TENSORS):
// |stream| and |seq| name the launch command (as in launch_begin); the
// summary's fields are copied (|s| and its strings, never NULL, are read
// during the call only); |min|, |max| and |mean| are over the finite
// elements (0 when there is none).
LTTNG_UST_TRACEPOINT_EVENT(accel, tensor_summary,
  LTTNG_UST_TP_ARGS(uint32_t, stream, uint64_t, seq,
                    const accel_trace_tensor_summary_t *, s),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, stream, stream)
    lttng_ust_field_integer(uint64_t, seq, seq)
    lttng_ust_field_string(kernel, s->kernel)
    lttng_ust_field_integer(uint32_t, binding, s->binding)
    lttng_ust_field_string(name, s->name)
    lttng_ust_field_integer(uint64_t, count, s->count)
    lttng_ust_field_float(double, min, s->min)
    lttng_ust_field_float(double, max, s->max)
    lttng_ust_field_float(double, mean, s->mean)
    lttng_ust_field_integer(uint64_t, nan, s->nan)
    lttng_ust_field_integer(uint64_t, inf, s->inf)))

LTTNG_UST_TRACEPOINT_EVENT(accel, counter_sample,
  LTTNG_UST_TP_ARGS(uint32_t, scope, const char *, scope_name,
                    const char *, name, uint64_t, value),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint32_t, scope, scope)
    lttng_ust_field_string(scope_name, scope_name)
    lttng_ust_field_string(name, name)
    lttng_ust_field_integer(uint64_t, value, value)))

// Log levels: one event per command, copy, buffer, semaphore operation,
// counter sample or tensor summary is DEBUG, so that `lttng enable-event
// -u 'accel:*' --loglevel=TRACE_INFO` records the lifecycle, failures and errors only
// (an isolated run at full rate lost 592,898 events of a default channel);
// the rest stay at LTTng's default (TRACE_DEBUG_LINE is never used).
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, buffer_alloc, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, buffer_free, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, cmd_enqueue, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, cmd_start, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, cmd_end, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, launch_begin, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, launch_end, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, copy_submit, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, copy_start, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, copy_end, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, event_record, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, event_complete, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, counter_sample, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, tensor_summary, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, semaphore_signal, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, semaphore_wait, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, semaphore_wake, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, runtime_create, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, runtime_destroy, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, device_open, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, device_close, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, stream_create, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, stream_destroy, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, error, LTTNG_UST_TRACEPOINT_LOGLEVEL_ERR)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, stream_fail, LTTNG_UST_TRACEPOINT_LOGLEVEL_ERR)
LTTNG_UST_TRACEPOINT_LOGLEVEL(accel, kernel_message, LTTNG_UST_TRACEPOINT_LOGLEVEL_NOTICE)

#endif  // ACCEL_TRACE_TP_H_

#include <lttng/tracepoint-event.h>
