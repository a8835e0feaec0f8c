#include "common/hooks/hook_argv.hpp"

#include <stdexcept>

namespace orch {
namespace {

std::string flag(const char* name, const std::string& value)
{
    if (value.find('\0') != std::string::npos) {
        throw std::invalid_argument(std::string("hook argument ") + name + " contains a NUL byte");
    }
    return std::string(name) + "=" + value;
}

} // namespace

std::vector<std::string> build_hook_argv(const Hook& hook, const HookArguments& args)
{
    std::vector<std::string> argv = hook.interpreter;
    argv.push_back(hook.path.string());
    argv.push_back(flag("--url", args.url));
    bool crawl_level = hook.event == "Crawl" || hook.event == "CrawlEnd";
    if (args.snapshot_id && !crawl_level) {
        argv.push_back(flag("--snapshot-id", *args.snapshot_id));
    }
    argv.push_back(flag("--crawl-id", args.crawl_id));
    return argv;
}

} // namespace orch
