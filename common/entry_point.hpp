#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace orch {

// Parses argv with `app`, then runs `body`, turning every outcome into the shared
// exit-code table (common/exit_codes.hpp): --help/--version 0, parse errors 2,
// orch::Error its own code, lost database connections 4, anything else 1. Errors
// are printed as one line "<program>: error: <message>" on stderr.
// Re-executes the process once first (common/lean_exec.hpp).
int guarded_main(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

} // namespace orch
