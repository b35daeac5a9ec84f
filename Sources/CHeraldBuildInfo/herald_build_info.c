#include "herald_build_info.h"

// herald_revision.h is generated and never committed (.gitignore): scripts/stamp-revision writes
// `#define HERALD_REVISION "…"` from `git describe`, deploy/Dockerfile from its HERALD_REVISION
// build argument (.dockerignore keeps .git out of the image's build context). Only this file
// includes it, so a new revision recompiles one C file, not the Swift modules.
#if __has_include("herald_revision.h")
#include "herald_revision.h"
#endif
#ifndef HERALD_REVISION
#define HERALD_REVISION "unknown"
#endif

const char *herald_build_revision(void) { return HERALD_REVISION; }
