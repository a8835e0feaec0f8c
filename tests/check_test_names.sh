#!/usr/bin/env bash
# ctest hands each Catch2 test its own name as a filter; Catch reads ',' as "or"
# and ctest cuts at ';', so such a name would match nothing. Fail on any.
set -euo pipefail
bad=0
for exe in "$@"; do
    while IFS= read -r name; do
        if [[ "$name" == *","* || "$name" == *";"* ]]; then
            echo "unusable test name in $(basename "$exe"): $name"
            bad=1
        fi
    done < <("$exe" --list-test-names-only)
done
[[ $bad -eq 0 ]] && echo "all test names are usable as ctest filters"
exit $bad
