#!/bin/sh
# upgrade: install the sysctl files (the interrupt loads them).
. "$GPUFLEET_PACKAGE_DIR/sysctl-lib.sh"
install_files
echo "installed $GPUFLEET_PACKAGE $GPUFLEET_VERSION ($GPUFLEET_STAGE)"
