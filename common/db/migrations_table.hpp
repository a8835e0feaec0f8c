#pragma once

#include <vector>

namespace orch {

// One versioned SQL file from migrations/, compiled into the binary.
struct EmbeddedMigration {
    int version;
    const char* name;
    const char* sha256; // of the file's bytes, lower-case hex
    const char* sql;
};

// All migrations this binary knows, in ascending version order.
const std::vector<EmbeddedMigration>& embedded_migrations();

} // namespace orch
