#pragma once

#include <map>
#include <string>

namespace orch {

// Debian's libpq links libldap, which links GnuTLS, whose library constructor
// initialises GnuTLS (and loads p11-kit's modules) in every process that loads
// libpq, though we never speak TLS through GnuTLS (libpq uses OpenSSL). That
// costs about 0.8 MB of resident memory per process (bench row 6). GnuTLS
// skips it when GNUTLS_NO_IMPLICIT_INIT=1 is in the environment at load time,
// which only an exec can arrange: the first start of a process sets it and
// re-executes itself (same pid, same argv); the second start removes it again,
// so that no child (a hook that relies on GnuTLS initialising itself) inherits
// it. A variable the user set is left alone, and so is the process if the exec
// fails. With `reexec` false (a short-lived command, whose memory does not
// matter, where the second load of the binary and its ~25 shared libraries
// would cost more than the command's work: about 20 ms on a VM where page
// faults are dear) it only does the second start's part: removes the variables
// a parent gave it. Call before argv is modified. Never throws.
void reexec_without_gnutls_init(char** argv, bool reexec = true) noexcept;

// Adds the variables of the second start to a worker's environment (its
// LaunchRequest::private_env: not recorded), so that a worker we spawn starts
// lean at once instead of paying the extra exec (about 3.5 ms per start on
// the bench VM). Only for our own executables: hooks never get them.
void add_lean_exec_environment(std::map<std::string, std::string>& env);

} // namespace orch
