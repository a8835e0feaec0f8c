#include "orchestrator/crawl_enqueue.hpp"

#include "common/errors.hpp"
#include "common/url.hpp"

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

std::string enqueue_crawl(pqxx::work& tx, const NewCrawl& crawl)
{
    auto urls = validated_urls(crawl.urls);
    if (crawl.max_depth < 0 || crawl.max_depth > 100) {
        throw InvalidInput(fmt::format("depth {} out of range 0..100", crawl.max_depth));
    }
    if (!crawl.config.is_object()) {
        throw InvalidInput("crawl config must be a JSON object");
    }
    // libpqxx 6.4 has no array parameters: arrays travel as JSON and are unpacked by the server.
    auto r = tx.exec_params1(
        "INSERT INTO crawl (urls, max_depth, max_urls, timeout_s, label, tags, config, max_per_host, host_delay_s) "
        "VALUES (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)), $2, $3, $4, $5, "
        "ARRAY(SELECT jsonb_array_elements_text($6::jsonb)), $7::jsonb, $8, $9) RETURNING id",
        nlohmann::json(urls).dump(), crawl.max_depth, crawl.max_urls, crawl.timeout_s, crawl.label,
        nlohmann::json(crawl.tags).dump(), crawl.config.dump(), crawl.max_per_host, crawl.host_delay_s);
    return r[0].as<std::string>();
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
