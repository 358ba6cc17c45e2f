#!/usr/bin/env bash
# Checks that every C++ file git tracks under src/, tests/, bench/ and fuzz/ is formatted as
# .clang-format says, with the clang-format of the Debian release the project builds on
# (clang-format-14: another version formats a few constructs differently). Prints each file
# that differs and exits 1; `make format` rewrites them. Run by CTest (`format`) and by hand:
#   scripts/check-format.sh [REPO_ROOT]
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cf="${CLANG_FORMAT:-clang-format-14}"
if ! command -v "$cf" >/dev/null; then
  echo "check-format: $cf not found; scripts/install-deps.sh installs it (or set CLANG_FORMAT)" >&2
  exit 2
fi
cd "$root"
bad=0
while IFS= read -r f; do
  if ! "$cf" --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "$f: not formatted (run: make format)" >&2
    bad=$((bad + 1))
  fi
done < <(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' 'bench/*.h' \
           'fuzz/*.cc' 'fuzz/*.h')
if ((bad > 0)); then
  echo "check-format: $bad file(s) differ from .clang-format" >&2
  exit 1
fi
echo "check-format: ok"
