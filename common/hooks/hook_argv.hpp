#pragma once

#include "common/hooks/hook_discovery.hpp"

#include <optional>
#include <string>
#include <vector>

// The command line of one hook run: argv for execve()/posix_spawn() directly,
// never a shell string, so a URL full of metacharacters arrives as one argument.
namespace orch {

struct HookArguments {
    std::string url;
    std::optional<std::string> snapshot_id;
    std::string crawl_id;
};

// [interpreter..., hook.path, "--url=<url>", "--snapshot-id=<id>", "--crawl-id=<id>"]
// --snapshot-id is left out for Crawl and CrawlEnd hooks and when no snapshot
// id is given. Throws std::invalid_argument if a value contains a NUL byte
// (exec would silently cut it short).
std::vector<std::string> build_hook_argv(const Hook& hook, const HookArguments& args);

} // namespace orch
