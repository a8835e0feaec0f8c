#include "common/app/worker_command_line.hpp"
#include "crawl_worker/crawl_worker.hpp"

int main(int argc, char** argv)
{
    using namespace orch;
    CrawlWorkerOptions options;
    WorkerCommandLine command_line("crawl", "Runs one crawl: its hooks, its snapshots and their workers, then seals it.",
                                   options.crawl_id, options);
    command_line.add_plugins_dir();
    auto& app = command_line.app();
    app.add_option("--max-snapshot-workers", options.max_snapshot_workers, "snapshot workers at once (default 8)")
        ->envname("MAX_SNAPSHOT_WORKERS")
        ->check(CLI::Range(1, 256));
    return command_line.run(argc, argv, [&](const CommonOptions& common) { return run_crawl_worker(common, options); });
}
