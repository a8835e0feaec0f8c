#include "tests/workers/worker_fixture.hpp"

#include "tests/support/db_query.hpp"
#include <catch2/catch.hpp>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace orch::test {
namespace {

namespace fs = std::filesystem;

std::string slurp_proc(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Process state letter from /proc/<pid>/stat ('?' if unreadable).
char proc_state(const std::string& pid)
{
    auto stat = slurp_proc("/proc/" + pid + "/stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) {
        return '?';
    }
    return stat[close + 2];
}

std::string text_or_empty(const pqxx::field& f)
{
    return f.is_null() ? std::string() : f.as<std::string>();
}

} // namespace

WorkerFixture::WorkerFixture()
    : root("orch-sw-"), plugins(root / "plugins"), data(root / "data")
{
    fs::create_directories(plugins);
    fs::create_directories(data);
}

std::string WorkerFixture::add_crawl(int max_depth, std::optional<int> max_urls, const std::string& config_json)
{
    auto conn = db.connect();
    pqxx::work tx(*conn);
    auto id = tx.exec_params1("INSERT INTO crawl (urls, max_depth, max_urls, config, scope) "
                              "VALUES ('{http://a.test/}', $1, $2, $3::jsonb, 'any') RETURNING id",
                              max_depth, max_urls, config_json)[0]
                  .as<std::string>();
    tx.commit();
    return id;
}

std::string WorkerFixture::add_snapshot(const std::string& crawl, const std::string& url, int depth)
{
    auto conn = db.connect();
    pqxx::work tx(*conn);
    auto id = tx.exec_params1("INSERT INTO snapshot (crawl_id, url, depth) VALUES ($1, $2, $3) RETURNING id", crawl,
                              url, depth)[0]
                  .as<std::string>();
    tx.commit();
    return id;
}

std::string WorkerFixture::add_simple_snapshot()
{
    return add_snapshot(add_crawl(), "http://a.test/");
}

fs::path WorkerFixture::write_hook(const std::string& plugin, const std::string& file, const std::string& body,
                                   bool executable)
{
    auto dir = plugins / plugin;
    fs::create_directories(dir);
    auto path = dir / file;
    std::ofstream(path) << body;
    fs::permissions(path, executable ? fs::perms(0755) : fs::perms(0644));
    return path;
}

void WorkerFixture::write_config(const std::string& plugin, const std::string& json)
{
    auto dir = plugins / plugin;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << json;
}

EnvChanges WorkerFixture::worker_env(const EnvChanges& extra) const
{
    EnvChanges env{{"ORCH_BUILTIN_PLUGINS_DIR", ""},
                   {"PLUGINS_DIR", plugins.string()},
                   {"TEARDOWN_GRACE", "1"},
                   {"HOOK_PARALLELISM", std::nullopt},
                   {"LEASE_TTL", std::nullopt},
                   {"PLUGINS", std::nullopt},
                   {"ORCH_CONTAINMENT", std::nullopt}};
    if (!containment.empty()) {
        env["ORCH_CONTAINMENT"] = containment;
    }
    for (const auto& [k, v] : extra) {
        env[k] = v;
    }
    return env;
}

std::vector<std::string> WorkerFixture::worker_argv(const std::string& snapshot_id) const
{
    return {bin_path("snapshot_worker").string(), "--snapshot-id", snapshot_id, "--database-url", db.url(),
            "--data-dir", data.string()};
}

std::unique_ptr<SpawnedProcess> WorkerFixture::start_worker(const std::string& snapshot_id,
                                                            const EnvChanges& extra) const
{
    return std::make_unique<SpawnedProcess>(worker_argv(snapshot_id), worker_env(extra));
}

std::unique_ptr<SpawnedProcess> WorkerFixture::run_worker(const std::string& snapshot_id, const EnvChanges& extra,
                                                          std::chrono::milliseconds timeout) const
{
    auto p = start_worker(snapshot_id, extra);
    bool done = p->wait_for(timeout);
    INFO(p->err());
    REQUIRE(done);
    return p;
}

std::map<std::string, ResultRow> WorkerFixture::results(const std::string& snapshot_id) const
{
    auto conn = db.connect();
    pqxx::read_transaction tx(*conn);
    auto rows = tx.exec_params("SELECT hook_name, status, error, output_str, output_json::text, output_files::text, "
                               "process_id::text, attempts FROM archive_result WHERE snapshot_id = $1",
                               snapshot_id);
    std::map<std::string, ResultRow> out;
    for (const auto& row : rows) {
        auto hook = row[0].as<std::string>();
        hook = hook.substr(hook.find('/') + 1);
        out[hook] = ResultRow{row[1].as<std::string>(), text_or_empty(row[2]), text_or_empty(row[3]),
                              text_or_empty(row[4]), text_or_empty(row[5]), text_or_empty(row[6]), row[7].as<int>()};
    }
    return out;
}

std::string WorkerFixture::scalar(const std::string& sql, const std::vector<std::string>& params) const
{
    return test::scalar(*db.connect(), sql, params);
}

void WorkerFixture::exec(const std::string& sql, const std::vector<std::string>& params) const
{
    execute(*db.connect(), sql, params);
}

std::vector<std::string> WorkerFixture::leftover_processes() const
{
    std::set<std::string> cookies;
    {
        auto conn = db.connect();
        pqxx::read_transaction tx(*conn);
        for (const auto& row : tx.exec("SELECT cookie FROM process WHERE cookie IS NOT NULL")) {
            cookies.insert("ORCH_PROCESS_COOKIE=" + row[0].as<std::string>());
        }
    }
    std::vector<std::string> left;
    const std::string self = std::to_string(::getpid());
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) {
        return left;
    }
    while (auto* entry = ::readdir(proc)) {
        std::string pid = entry->d_name;
        if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit) || pid == self) {
            continue;
        }
        auto cmdline = slurp_proc("/proc/" + pid + "/cmdline");
        std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
        bool mine = cmdline.find(root.path().string()) != std::string::npos;
        if (!mine) {
            auto environ = slurp_proc("/proc/" + pid + "/environ");
            std::istringstream vars(environ);
            std::string var;
            while (!mine && std::getline(vars, var, '\0')) {
                mine = cookies.count(var) > 0;
            }
        }
        if (mine) {
            char state = proc_state(pid);
            if (state != 'Z' && state != 'X' && state != '?') {
                left.push_back(pid + " [" + state + "] " + cmdline);
            }
        }
    }
    ::closedir(proc);
    return left;
}

std::vector<std::string> WorkerFixture::wait_no_leftovers(std::chrono::milliseconds timeout) const
{
    std::vector<std::string> left;
    eventually([&] {
        left = leftover_processes();
        return left.empty();
    },
               timeout);
    return left;
}

std::string read_text(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<std::string> read_lines(const std::filesystem::path& path)
{
    std::vector<std::string> lines;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        lines.push_back(line);
    }
    return lines;
}

long count_lines(const std::filesystem::path& path, const std::string& line)
{
    auto lines = read_lines(path);
    return std::count(lines.begin(), lines.end(), line);
}

} // namespace orch::test
