// accel-run --model FILE.gguf --tokenize --prompt TEXT: the ids the model
// would be fed for TEXT (BOS/EOS by the file's flags; special-token text is
// not parsed), printed as one JSON array. Running a model (generation,
// logits) is issue #24 item 3's other half and is refused until it exists.
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/accel.h"
#include "tool_cli.h"

static const accel_tool_option_t k_options[] = {
    {"--model", "FILE", 0, "the model file (.gguf) whose vocabulary is used"},
    {"--prompt", "TEXT", 0, "the text to tokenize"},
    {"--tokenize", NULL, 0,
     "print the ids of --prompt as a JSON array and exit"},
};
enum { OPT_MODEL, OPT_PROMPT, OPT_TOKENIZE };

static const accel_tool_spec_t k_spec = {
    .name = "accel-run",
    .synopsis = "--model FILE.gguf --tokenize --prompt TEXT",
    .description = "Prints the token ids a GGUF model would be fed for a "
                   "prompt, with the model's own tokenizer, as a JSON array.",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
    .min_positional = 0,
    .max_positional = 0,
};

int main(int argc, char **argv) {
  accel_tool_args_t args;
  int rc = accel_tool_parse(&k_spec, argc, argv, &args);
  if (rc != ACCEL_TOOL_CONTINUE) {
    return rc;
  }
  const char *model = args.values[OPT_MODEL];
  const char *prompt = args.values[OPT_PROMPT];
  if (model == NULL) {
    return accel_tool_usage_error(&k_spec, "--model FILE is required");
  }
  if (args.values[OPT_TOKENIZE] == NULL) {
    return accel_tool_usage_error(
        &k_spec,
        "--tokenize is required: running a model is not available yet");
  }
  if (prompt == NULL) {
    return accel_tool_usage_error(&k_spec, "--tokenize needs --prompt TEXT");
  }
  accel_gguf_t *gguf = NULL;
  accel_tokenizer_t *tok = NULL;
  int32_t *ids = NULL;
  size_t count = 0;
  accel_status_t st = accel_gguf_open_file(model, &gguf);
  if (st == ACCEL_OK) {
    st = accel_tokenizer_create_from_gguf(gguf, &tok);
  }
  if (st == ACCEL_OK) {
    st = accel_tokenizer_encode(tok, prompt, strlen(prompt),
                                ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, NULL, 0,
                                &count);
  }
  if (st == ACCEL_OK && count != 0) {
    ids = malloc(count * sizeof(int32_t));
    st = ids == NULL ? ACCEL_ERROR_OUT_OF_MEMORY
                     : accel_tokenizer_encode(
                           tok, prompt, strlen(prompt),
                           ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, ids, count,
                           &count);
  }
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-run: %s: %s: %s\n", model, accel_status_name(st),
            ids == NULL && st == ACCEL_ERROR_OUT_OF_MEMORY
                ? "no memory for the ids"
                : accel_last_error());
    rc = 1;
  } else {
    putchar('[');
    for (size_t i = 0; i < count; ++i) {
      printf(i ? ", %d" : "%d", ids[i]);
    }
    printf("]\n");
    rc = fflush(stdout) == 0 ? 0 : 1;
  }
  free(ids);
  accel_tokenizer_destroy(tok);
  accel_gguf_close(gguf);
  return rc;
}
