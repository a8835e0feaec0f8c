#pragma once

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include <optional>
#include <string>
#include <vector>

namespace orch {

// What `orchestrator add` and schedules turn into one crawl row.
struct NewCrawl {
    std::vector<std::string> urls; // raw, as given; validated by enqueue_crawl
    int max_depth = 0;
    std::string scope = "host"; // crawl_scope.hpp's names; checked by enqueue_crawl
    std::optional<int> max_urls;
    std::optional<int> max_per_host; // snapshots of one host at once (migrations/0016)
    std::optional<double> host_delay_s; // seconds between two starts on one host
    std::optional<int> timeout_s;
    std::optional<std::string> label;
    std::vector<std::string> tags;
    nlohmann::json config = nlohmann::json::object();
};

// Validates every URL and normalises them (duplicates dropped). Throws InvalidInput
// naming each offending value (all of them, so a user can fix a file in one go);
// nothing is written in that case.
std::vector<std::string> validated_urls(const std::vector<std::string>& raw);

struct Enqueued {
    std::string id;
    bool created = false; // false: a crawl with this id and these settings already existed
};

// Inserts one queued crawl with the id `id` (a UUID the caller made, so that a
// retry after a commit in doubt can find its own row) inside `tx`. When a crawl
// with that id exists already and was added with the same URLs and settings,
// inserts nothing and says so (created false): adding is idempotent by id.
// Throws InvalidInput for bad input, or when the existing crawl differs.
Enqueued enqueue_crawl(pqxx::work& tx, const NewCrawl& crawl, const std::string& id);

// Reads URLs from a file ("-" = stdin): one per line, blank lines and '#' comments skipped.
// Throws InvalidInput when the file cannot be read.
std::vector<std::string> read_urls_file(const std::string& path);

} // namespace orch
