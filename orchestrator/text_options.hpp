#pragma once

#include <CLI/CLI.hpp>

#include <initializer_list>

namespace orch {

// Free text given on the command line (a label, a tag, a pause reason, a filter)
// ends up in text and jsonb parameters and in JSON output, all of which refuse
// ill-formed UTF-8 with an error that names neither the option nor the cause.
// Checks every value given to each option of `cmd` named in `names` ("--label",
// or a positional's name) and throws InvalidInput naming the first option whose
// value is not valid UTF-8, before anything is read or written. Options not
// given are skipped; a name `cmd` does not have is a programming error
// (CLI::OptionNotFound).
void require_utf8_options(const CLI::App& cmd, std::initializer_list<const char*> names);

} // namespace orch
