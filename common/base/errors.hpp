#pragma once

#include "common/base/exit_codes.hpp"

#include <stdexcept>
#include <string>

// Errors that carry the exit code main() should return. Library code throws
// them for conditions the user can fix; everything else is internal_error.
namespace orch {

class Error : public std::runtime_error {
public:
    Error(ExitCode code, const std::string& message) : std::runtime_error(message), m_code(code) {}
    ExitCode code() const noexcept { return m_code; }

private:
    ExitCode m_code;
};

struct ConfigError : Error {
    explicit ConfigError(const std::string& m) : Error(ExitCode::config, m) {}
};
struct DatabaseUnavailable : Error {
    explicit DatabaseUnavailable(const std::string& m) : Error(ExitCode::database_unavailable, m) {}
};
struct SchemaMismatch : Error {
    explicit SchemaMismatch(const std::string& m) : Error(ExitCode::schema_mismatch, m) {}
};
struct NotFound : Error {
    explicit NotFound(const std::string& m) : Error(ExitCode::not_found, m) {}
};
struct LeaseLost : Error {
    explicit LeaseLost(const std::string& m) : Error(ExitCode::lease_lost, m) {}
};
struct InvalidInput : Error {
    explicit InvalidInput(const std::string& m) : Error(ExitCode::invalid_input, m) {}
};

// Throws std::system_error built from errno; `what` names the failed call.
[[noreturn]] void throw_errno(const std::string& what);

} // namespace orch
