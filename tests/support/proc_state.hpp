#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace orch::test {

// Whether `pid` names a live process: in /proc and neither a zombie nor dead.
bool process_alive(pid_t pid);

// Live processes other than the test itself whose environment carries one of
// `cookie_vars` (whole "ORCH_PROCESS_COOKIE=<uuid>" entries) or, when `marker`
// is not empty, whose command line mentions it: "pid cmdline" (NULs as spaces).
std::vector<std::string> processes_marked(const std::vector<std::string>& cookie_vars, const std::string& marker);

} // namespace orch::test
