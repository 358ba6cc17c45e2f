#!/bin/sh
# uninstall: remove the files; the interrupt reloads sysctl.d without them (values already
# set in the kernel stay until the next reboot, as with any sysctl.d change).
. "$GPUFLEET_PACKAGE_DIR/sysctl-lib.sh"
remove_files
