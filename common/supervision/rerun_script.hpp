#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace orch {

// Quotes `word` for POSIX sh so it reaches the program unchanged.
std::string shell_quote(std::string_view word);

// Writes an executable sh script that reruns `argv` in `pwd` with exactly
// `env` (env -i), so a person can reproduce a hook run by hand. Values listed
// in `from_caller` are taken from the rerunner's environment instead of being
// written out (secrets). Throws std::system_error if the file cannot be written.
void write_rerun_script(const std::filesystem::path& path, const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env, const std::filesystem::path& pwd,
                        const std::vector<std::string>& from_caller);

} // namespace orch
