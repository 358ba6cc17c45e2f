#!/bin/sh
. "$GPUFLEET_PACKAGE_DIR/sysctl-lib.sh"
check_files
