// Command-line parsing shared by accel's tools: one table of options per
// tool, from which --help, --version, unknown-option errors and exclusive
// option groups all follow, so that every tool behaves the same way.
//
// A tool describes its options in an array of accel_tool_option_t and calls
// accel_tool_parse() first thing in main(). --help (or -h) and --version are
// always accepted and need no entry in the table.
#ifndef ACCEL_TOOLS_COMMON_TOOL_CLI_H_
#define ACCEL_TOOLS_COMMON_TOOL_CLI_H_

#include <stddef.h>

// Exit status of a tool called with bad arguments (as getopt-based tools and
// sysexits' EX_USAGE convention by shells: 2).
#define ACCEL_TOOL_EXIT_USAGE 2
// accel_tool_parse's answer when the tool should go on running.
#define ACCEL_TOOL_CONTINUE (-1)
// The most options one tool may declare.
#define ACCEL_TOOL_MAX_OPTIONS 32

// One option of a tool.
typedef struct accel_tool_option {
  // As typed on the command line, dashes included: "--json", "-o".
  const char *name;
  // The argument's name in the help ("FILE"); NULL for a flag that takes none.
  const char *metavar;
  // Options sharing a non-zero group exclude each other; 0: no group.
  unsigned group;
  // One line, lower case, no trailing period: what the option does.
  const char *help;
} accel_tool_option_t;

// A tool's command line.
typedef struct accel_tool_spec {
  const char *name;         // "accel-info"
  const char *synopsis;     // what follows the name on the usage line(s)
  const char *description;  // one sentence: what the tool does
  const accel_tool_option_t *options;
  size_t option_count;      // at most ACCEL_TOOL_MAX_OPTIONS
  int min_positional;       // arguments that are not options
  int max_positional;
} accel_tool_spec_t;

// What accel_tool_parse found.
typedef struct accel_tool_args {
  // Per option, by index in the table: NULL when not given, "" for a flag
  // given, the argument for an option that takes one (the last one given).
  const char *values[ACCEL_TOOL_MAX_OPTIONS];
  // The arguments that are not options, in order (points into argv).
  char **positional;
  int positional_count;
} accel_tool_args_t;

// Parses |argc|/|argv| against |spec| into |*out|. Accepts "--name value",
// "--name=value" and "--" (all that follows is positional).
// Returns ACCEL_TOOL_CONTINUE when the tool should run; 0 after printing the
// help or the version on stdout; ACCEL_TOOL_EXIT_USAGE after naming the
// problem on stderr (an unknown option, a missing argument, two options of
// one exclusive group, too few or too many positional arguments).
// Reorders |argv| in place (the positional arguments move to the front).
// Not thread-safe.
int accel_tool_parse(const accel_tool_spec_t *spec, int argc, char **argv,
                     accel_tool_args_t *out);

// Prints "NAME: " and the formatted message on stderr, a hint to run
// --help, and returns ACCEL_TOOL_EXIT_USAGE. For argument errors a tool
// finds after parsing (an unknown subcommand).
int accel_tool_usage_error(const accel_tool_spec_t *spec, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Prints the |size| bytes at |s| as a JSON string on stdout: quotes and
// backslashes escaped, control bytes as \u00XX, other bytes as they are
// (UTF-8 passes through). Not thread-safe (stdout).
void accel_tool_json_string(const char *s, size_t size);

// The same for a NUL-terminated |s|.
void accel_tool_print_json_string(const char *s);

#endif  // ACCEL_TOOLS_COMMON_TOOL_CLI_H_
