#include "common/supervision/child_environment.hpp"

#include "common/base/name_memo.hpp"
#include "common/supervision/process_identity.hpp"

#include <algorithm>
#include <cctype>

namespace orch {
namespace {

std::string upper(std::string_view text)
{
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::toupper(c); });
    return out;
}

bool ends_with(const std::string& text, const std::string& suffix)
{
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool compute_database_variable(std::string_view name)
{
    const auto n = upper(name);
    return n == "DATABASE_URL" || ends_with(n, "_DATABASE_URL") || n.rfind("PG", 0) == 0;
}

bool compute_secret_variable(std::string_view name)
{
    const auto n = upper(name);
    for (const char* marker : {"PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL", "PRIVATE", "API_KEY",
                               "ACCESS_KEY", "AUTH"}) {
        if (n.find(marker) != std::string::npos) {
            return true;
        }
    }
    return ends_with(n, "_KEY") || compute_database_variable(name);
}

} // namespace

bool is_database_variable(const std::string& name)
{
    return memoized<compute_database_variable>(name);
}

bool is_secret_variable(const std::string& name)
{
    return memoized<compute_secret_variable>(name);
}

std::map<std::string, std::string> child_environment(std::map<std::string, std::string> env,
                                                     const std::string& cookie)
{
    for (auto it = env.begin(); it != env.end();) {
        it = is_database_variable(it->first) || it->first == k_process_id_env_var ? env.erase(it) : std::next(it);
    }
    env[k_cookie_env_var] = cookie;
    return env;
}

std::map<std::string, std::string> redacted(const std::map<std::string, std::string>& env)
{
    auto copy = env;
    for (auto& [name, value] : copy) {
        if (is_secret_variable(name)) {
            value = "<redacted>";
        }
    }
    return copy;
}

std::vector<std::string> secret_names(const std::map<std::string, std::string>& env)
{
    std::vector<std::string> names;
    for (const auto& [name, value] : env) {
        if (is_secret_variable(name)) {
            names.push_back(name);
        }
    }
    return names;
}

} // namespace orch
