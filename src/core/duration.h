// Durations now live in core/time.h, the one home of time. This header stays only so that
// branches written before the move still build; include "core/time.h" in new code.
#pragma once

#include "core/time.h"  // IWYU pragma: export
