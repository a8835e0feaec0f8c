#pragma once

#include <string>
#include <vector>

// The argv recorded in a process row: a person reading `process.cmd` (or a
// dashboard) must never see a credential that was passed on a command line.
namespace orch {

// True for option names whose value is a credential or a connection string
// (--database-url, --password, --api-token, ...), with or without dashes.
bool is_secret_option(const std::string& option);

// `argv` with the value of every secret option replaced by "<redacted>", in
// both the "--opt value" and "--opt=value" forms, and the password of any
// URL with user:password@ userinfo masked. Pure; never throws.
std::vector<std::string> redact_command_line(std::vector<std::string> argv);

// This process's own argv from /proc/self/cmdline, redacted as above.
// Returns an empty vector when /proc cannot be read.
std::vector<std::string> own_command_line();

// Overwrites, in this process's own argv memory, the part of every argument
// that redact_command_line() would hide, so that `ps` and /proc/PID/cmdline
// show x's instead of a password. Call only after the arguments were parsed
// (parsers copy them). Never throws.
void hide_secret_arguments(int argc, char** argv);

} // namespace orch
