#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

// A pure predicate over names (environment variables, options), remembered per
// thread. The supervisor asks the same few questions of the same dozen names
// for every hook it starts (is it a database variable, a secret, one to redact
// from cmd.sh), about 150 times per snapshot of three hooks: upper-casing and
// searching each name every time was a tenth of a snapshot worker's
// instructions (callgrind, bench row 2). At most k_max_names are kept, so a
// process fed ever new names (a hostile environment) stays bounded: past that,
// answers are computed each time. Never throws except std::bad_alloc.
namespace orch {

template <bool (*Compute)(std::string_view)>
bool memoized(std::string_view name)
{
    constexpr std::size_t k_max_names = 512;
    thread_local std::unordered_map<std::string, bool> known;
    std::string key(name);
    if (const auto it = known.find(key); it != known.end()) {
        return it->second;
    }
    const bool answer = Compute(name);
    if (known.size() < k_max_names) {
        known.emplace(std::move(key), answer);
    }
    return answer;
}

} // namespace orch
