#include "common/app/entry_point.hpp"
#include "crawl_worker/crawl_worker.hpp"

int main(int argc, char** argv)
{
    using namespace orch;
    CLI::App app{"Runs one crawl: its hooks, its snapshots and their workers, then seals it.", "crawl_worker"};
    CommonOptions common;
    add_common_options(app, common);
    CrawlWorkerOptions options;
    app.add_option("--crawl-id", options.crawl_id, "the crawl to run")->required();
    app.add_option("--process-id", options.process_id, "process row prepared by the parent (internal)");
    app.add_option("--plugins-dir", options.plugins_dir, "extra plugins directory")->envname("PLUGINS_DIR");
    app.add_option("--max-snapshot-workers", options.max_snapshot_workers, "snapshot workers at once (default 8)")
        ->envname("MAX_SNAPSHOT_WORKERS")
        ->check(CLI::Range(1, 256));
    return guarded_main(app, argc, argv, [&] {
        configure_logging("crawl_worker", common);
        return to_int(run_crawl_worker(common, options));
    });
}
