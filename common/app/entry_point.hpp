#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace orch {

// Parses argv with `app`, then runs `body`, turning every outcome into the shared
// exit-code table (common/base/exit_codes.hpp): --help/--version 0, parse errors 2,
// orch::Error its own code, lost database connections 4, anything else 1. Errors
// are printed as one line "<program>: error: <message>" on stderr.
// After a successful parse, re-executes the process once (common/config/lean_exec.hpp)
// when `long_lived()` says the parsed command keeps running (a supervisor or a
// worker, whose resident memory counts); a one-shot command runs in the first image.
int guarded_main(
    CLI::App& app, int argc, char** argv, const std::function<int()>& body,
    const std::function<bool()>& long_lived = [] { return true; });

} // namespace orch
