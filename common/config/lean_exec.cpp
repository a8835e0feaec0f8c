#include "common/config/lean_exec.hpp"

#include <climits>
#include <cstdlib>
#include <unistd.h>

namespace orch {
namespace {

constexpr const char* k_gnutls_variable = "GNUTLS_NO_IMPLICIT_INIT";
// Marks the variable as ours, so that the second start removes it.
constexpr const char* k_marker = "ORCH_LEAN_EXEC";

} // namespace

void reexec_without_gnutls_init(char** argv, bool reexec) noexcept
{
    if (std::getenv(k_gnutls_variable) != nullptr) {
        if (std::getenv(k_marker) != nullptr) {
            ::unsetenv(k_gnutls_variable);
            ::unsetenv(k_marker);
        }
        return;
    }
    if (!reexec) {
        return;
    }
    // The real path, not /proc/self/exe: the process name (comm) comes from it.
    char path[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        return;
    }
    path[n] = '\0';
    ::setenv(k_gnutls_variable, "1", 1);
    ::setenv(k_marker, "1", 1);
    ::execv(path, argv);
    // Deleted or replaced binary, no permission...: go on as we are.
    ::unsetenv(k_gnutls_variable);
    ::unsetenv(k_marker);
}

void add_lean_exec_environment(std::map<std::string, std::string>& env)
{
    env[k_gnutls_variable] = "1";
    env[k_marker] = "1";
}

} // namespace orch
