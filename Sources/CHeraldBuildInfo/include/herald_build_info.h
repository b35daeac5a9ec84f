#ifndef HERALD_BUILD_INFO_H
#define HERALD_BUILD_INFO_H

/// The git revision the binary was built from ("abc1234", "abc1234-dirty"), or "unknown" when
/// the build had none (scripts/stamp-revision writes it; deploy/Dockerfile takes a build argument).
const char *herald_build_revision(void);

#endif
