#pragma once

#include <vector>

namespace orch {

// One versioned SQL file from migrations/, compiled into the binary.
struct EmbeddedMigration {
    int version;
    const char* name;
    const char* sha256; // of the file's bytes, lower-case hex
    // Digests of earlier wordings of this file, space-separated ("" for none):
    // its comments changed after release, its statements did not
    // (migrations/reworded.txt).
    const char* reworded_from;
    const char* sql;
};

// All migrations this binary knows, in ascending version order.
const std::vector<EmbeddedMigration>& embedded_migrations();

} // namespace orch
