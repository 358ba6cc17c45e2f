#!/bin/sh
. "$GPUFLEET_PACKAGE_DIR/sysctl-lib.sh"
for f in "$prefix"*.conf; do
  [ -e "$f" ] && { echo "still installed: $f"; exit 1; }
done
exit 0
