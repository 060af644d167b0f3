// libFuzzer target for accel-serve's request parser
// (tools/accel-serve/completion_request.c): every body must be parsed or
// refused with a 4xx and a message; anything else (a crash, a sanitizer
// report, a leak, a hang) is a bug. A parsed request is checked against the
// limits it was parsed with. Built by scripts/fuzz-completion-request.sh.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "completion_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  completion_limits_t lim = {.model = "decoder", .vocab = 300,
                             .max_context = 512, .byte_prompts = true};
  completion_request_t r;
  char err[256];
  int st = completion_request_parse((const char *)data, size, &lim, &r, err,
                                    sizeof(err));
  if (st != 0) {
    if (st < 400 || st > 599 || err[0] == '\0' ||
        strnlen(err, sizeof(err)) == sizeof(err)) {
      abort();
    }
    return 0;
  }
  if (r.prompt_tokens == 0 || r.max_tokens == 0 ||
      (uint64_t)r.prompt_tokens + r.max_tokens > lim.max_context ||
      r.temperature < 0 || !(r.top_p > 0 && r.top_p <= 1)) {
    abort();
  }
  for (uint32_t i = 0; i < r.prompt_tokens; ++i) {
    if (r.prompt[i] < 0 || (uint32_t)r.prompt[i] >= lim.vocab) abort();
  }
  completion_request_free(&r);
  return 0;
}
