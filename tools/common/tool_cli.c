// Shared option parsing for accel's tools (tool_cli.h).
#include "tool_cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifndef ACCEL_TOOLS_VERSION
#error "ACCEL_TOOLS_VERSION must be defined by the build"
#endif

static void print_help(const accel_tool_spec_t *spec) {
  printf("usage: %s %s\n%s\n\noptions:\n", spec->name, spec->synopsis,
         spec->description);
  for (size_t i = 0; i < spec->option_count; ++i) {
    const accel_tool_option_t *o = &spec->options[i];
    char left[64];
    snprintf(left, sizeof(left), "%s%s%s", o->name, o->metavar ? " " : "",
             o->metavar ? o->metavar : "");
    printf("  %-22s %s\n", left, o->help);
  }
  printf("  %-22s %s\n", "-h, --help", "print this help and exit");
  printf("  %-22s %s\n", "--version", "print the version and exit");
}

int accel_tool_usage_error(const accel_tool_spec_t *spec, const char *fmt,
                           ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", spec->name);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nusage: %s %s\n(run '%s --help' for the options)\n",
          spec->name, spec->synopsis, spec->name);
  va_end(ap);
  return ACCEL_TOOL_EXIT_USAGE;
}

// The table index of |arg| ("--name" or "--name=value"), or -1.
static int find_option(const accel_tool_spec_t *spec, const char *arg) {
  size_t len = strcspn(arg, "=");
  for (size_t i = 0; i < spec->option_count; ++i) {
    const char *name = spec->options[i].name;
    if (strlen(name) == len && strncmp(name, arg, len) == 0) {
      return (int)i;
    }
  }
  return -1;
}

// Records option |index| given as argv[*i]; returns ACCEL_TOOL_CONTINUE or
// the exit status of a usage error.
static int take_option(const accel_tool_spec_t *spec, int index, int argc,
                       char **argv, int *i, accel_tool_args_t *out) {
  const accel_tool_option_t *o = &spec->options[index];
  const char *eq = strchr(argv[*i], '=');
  const char *value = "";
  if (o->metavar == NULL && eq != NULL) {
    return accel_tool_usage_error(spec, "option %s takes no argument",
                                  o->name);
  }
  if (o->metavar != NULL) {
    if (eq != NULL) {
      value = eq + 1;
    } else if (*i + 1 < argc) {
      value = argv[++*i];
    } else {
      return accel_tool_usage_error(spec, "option %s needs an argument %s",
                                    o->name, o->metavar);
    }
  }
  for (size_t k = 0; o->group != 0 && k < spec->option_count; ++k) {
    if ((int)k != index && spec->options[k].group == o->group &&
        out->values[k] != NULL) {
      return accel_tool_usage_error(spec, "options %s and %s exclude each other",
                                    spec->options[k].name, o->name);
    }
  }
  out->values[index] = value;
  return ACCEL_TOOL_CONTINUE;
}

static int check_positional(const accel_tool_spec_t *spec, int count) {
  if (count < spec->min_positional) {
    return accel_tool_usage_error(spec, "missing argument (%d given, %d needed)",
                                  count, spec->min_positional);
  }
  if (count > spec->max_positional) {
    return accel_tool_usage_error(spec,
                                  "too many arguments (%d given, at most %d)",
                                  count, spec->max_positional);
  }
  return ACCEL_TOOL_CONTINUE;
}

int accel_tool_parse(const accel_tool_spec_t *spec, int argc, char **argv,
                     accel_tool_args_t *out) {
  memset(out, 0, sizeof(*out));
  out->positional = argv + 1;
  int only_positional = 0;
  for (int i = 1; i < argc; ++i) {
    char *arg = argv[i];
    if (only_positional || arg[0] != '-' || strcmp(arg, "-") == 0) {
      out->positional[out->positional_count++] = arg;
      continue;
    }
    if (strcmp(arg, "--") == 0) {
      only_positional = 1;
    } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      print_help(spec);
      return 0;
    } else if (strcmp(arg, "--version") == 0) {
      printf("%s %s\n", spec->name, ACCEL_TOOLS_VERSION);
      return 0;
    } else {
      int index = find_option(spec, arg);
      if (index < 0) {
        return accel_tool_usage_error(spec, "unknown option \"%s\"", arg);
      }
      int rc = take_option(spec, index, argc, argv, &i, out);
      if (rc != ACCEL_TOOL_CONTINUE) {
        return rc;
      }
    }
  }
  return check_positional(spec, out->positional_count);
}

void accel_tool_json_string(const char *s, size_t size) {
  putchar('"');
  for (size_t i = 0; i < size; ++i) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      printf("\\%c", c);
    } else if (c < 0x20) {
      printf("\\u%04x", c);
    } else {
      putchar(c);
    }
  }
  putchar('"');
}

void accel_tool_print_json_string(const char *s) {
  accel_tool_json_string(s, strlen(s));
}
