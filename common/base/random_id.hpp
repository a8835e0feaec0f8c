#pragma once

#include <string>

namespace orch {

// A random (version 4) UUID in canonical text form, from getrandom().
// Throws std::system_error if the kernel cannot supply randomness.
std::string random_uuid();

} // namespace orch
