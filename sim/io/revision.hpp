// revision: the git revision of the source tree a build came from, recorded in every
// manifest, capture and report. sim/io/revision.cmake refreshes it at every build (not only at
// configure time), so results name the code that produced them.
#pragma once

namespace fp8sim {

// "3d9f9a5eba10" (12 hex digits), with "-dirty" when tracked files had uncommitted changes;
// "unknown" outside a git checkout.
const char* git_revision();

}  // namespace fp8sim
