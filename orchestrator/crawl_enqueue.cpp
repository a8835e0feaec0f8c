#include "orchestrator/crawl_enqueue.hpp"
#include "common/base/printable.hpp"

#include "common/base/printable.hpp"
#include "common/base/errors.hpp"
#include "common/url/crawl_scope.hpp"
#include "common/url/url.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>

namespace orch {
namespace {

std::string trim(const std::string& s)
{
    auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) {
        return {};
    }
    auto e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

std::vector<std::string> read_lines(std::istream& in)
{
    std::vector<std::string> urls;
    std::string line;
    while (std::getline(in, line)) {
        auto t = trim(line);
        if (t.empty() || t.front() == '#') {
            continue;
        }
        urls.push_back(t);
    }
    return urls;
}

} // namespace

std::vector<std::string> validated_urls(const std::vector<std::string>& raw)
{
    if (raw.empty()) {
        throw InvalidInput("no URLs given");
    }
    std::vector<std::string> out;
    std::set<std::string> seen;
    std::vector<std::string> problems;
    for (const auto& u : raw) {
        auto check = check_url(u);
        if (!check.valid) {
            problems.push_back(fmt::format("'{}': {}", printable(u, 120), check.error));
            continue;
        }
        if (seen.insert(check.valid->url).second) {
            out.push_back(check.valid->url);
        }
    }
    if (!problems.empty()) {
        std::string msg = fmt::format("{} invalid URL{}, nothing was added:", problems.size(),
                                      problems.size() == 1 ? "" : "s");
        for (std::size_t i = 0; i < problems.size() && i < 20; ++i) {
            msg += "\n  " + problems[i];
        }
        if (problems.size() > 20) {
            msg += fmt::format("\n  ... and {} more", problems.size() - 20);
        }
        throw InvalidInput(msg);
    }
    return out;
}

Enqueued enqueue_crawl(pqxx::work& tx, const NewCrawl& crawl, const std::string& id)
{
    auto urls = validated_urls(crawl.urls);
    if (crawl.max_depth < 0 || crawl.max_depth > 100) {
        throw InvalidInput(fmt::format("depth {} out of range 0..100", crawl.max_depth));
    }
    if (!parse_scope_mode(crawl.scope)) {
        throw InvalidInput(fmt::format("unknown scope '{}' (one of {})", printable(crawl.scope, 40), scope_mode_names()));
    }
    if (!crawl.config.is_object()) {
        throw InvalidInput("crawl config must be a JSON object");
    }
    // libpqxx 6.4 has no array parameters: arrays travel as JSON and are unpacked by the server.
    // An existing row answers whether it is this crawl: the same id from a
    // retried `add` (its own commit in doubt, or a script run twice) must not
    // become a second crawl, and a different crawl must not pass for it.
    auto r = tx.exec_params1(
        "WITH given AS (SELECT $10::uuid AS id, ARRAY(SELECT jsonb_array_elements_text($1::jsonb)) AS urls, "
        "  $2::integer AS max_depth, $3::integer AS max_urls, $4::integer AS timeout_s, $5::text AS label, "
        "  ARRAY(SELECT jsonb_array_elements_text($6::jsonb)) AS tags, $7::jsonb AS config, "
        "  $8::integer AS max_per_host, $9::double precision AS host_delay_s, $11::text AS scope), "
        "inserted AS (INSERT INTO crawl (id, urls, max_depth, max_urls, timeout_s, label, tags, config, "
        "  max_per_host, host_delay_s, scope) "
        "  SELECT id, urls, max_depth, max_urls, timeout_s, label, tags, config, max_per_host, host_delay_s, scope "
        "  FROM given ON CONFLICT (id) DO NOTHING RETURNING id) "
        "SELECT EXISTS (SELECT 1 FROM inserted), "
        "  EXISTS (SELECT 1 FROM crawl c, given g WHERE c.id = g.id AND c.urls = g.urls "
        "    AND c.max_depth = g.max_depth AND c.max_urls IS NOT DISTINCT FROM g.max_urls "
        "    AND c.timeout_s IS NOT DISTINCT FROM g.timeout_s AND c.label IS NOT DISTINCT FROM g.label "
        "    AND c.tags = g.tags AND c.config = g.config AND c.max_per_host IS NOT DISTINCT FROM g.max_per_host "
        "    AND c.host_delay_s IS NOT DISTINCT FROM g.host_delay_s AND c.scope = g.scope)",
        nlohmann::json(urls).dump(), crawl.max_depth, crawl.max_urls, crawl.timeout_s, crawl.label,
        nlohmann::json(crawl.tags).dump(), crawl.config.dump(), crawl.max_per_host, crawl.host_delay_s, id, crawl.scope);
    if (r[0].as<bool>()) {
        return {id, true};
    }
    if (!r[1].as<bool>()) {
        throw InvalidInput(fmt::format("crawl {} exists already with other URLs or settings: nothing was added", id));
    }
    return {id, false};
}

std::vector<std::string> read_urls_file(const std::string& path)
{
    if (path == "-") {
        return read_lines(std::cin);
    }
    std::ifstream in(path);
    if (!in) {
        throw InvalidInput(fmt::format("cannot read URLs file {}: {}", path, std::strerror(errno)));
    }
    auto urls = read_lines(in);
    if (in.bad()) {
        throw InvalidInput(fmt::format("error reading URLs file {}: {}", path, std::strerror(errno)));
    }
    return urls;
}

} // namespace orch
