#!/bin/sh
# Every public header compiles on its own, as C17 and as C++ (extern "C"),
# with warnings as errors.
set -eu
inc="$1"
status=0
for h in "$inc"/accel/*.h; do
  name="accel/$(basename "$h")"
  if ! printf '#include "%s"\n' "$name" | cc -std=c17 -Wall -Wextra -Werror \
      -fsyntax-only -I"$inc" -x c - ; then
    echo "header $name does not compile alone as C17"; status=1
  fi
  if command -v c++ >/dev/null 2>&1; then
    if ! printf '#include "%s"\n' "$name" | c++ -std=c++17 -Wall -Werror \
        -fsyntax-only -I"$inc" -x c++ - ; then
      echo "header $name does not compile alone as C++17"; status=1
    fi
  fi
done
[ $status -eq 0 ] && echo "all public headers compile alone (C17 and C++17)"
exit $status
