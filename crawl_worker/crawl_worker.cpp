#include "crawl_worker/crawl_worker.hpp"

#include "common/app/worker_startup.hpp"
#include "common/supervision/containment.hpp"
#include "common/work/crawl_config_check.hpp"
#include "common/db/database.hpp"
#include "common/db/database_outage.hpp"
#include "common/base/env_map.hpp"
#include "common/config/env_setting.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/hooks/hook_plan.hpp"
#include "common/work/host_rules.hpp"
#include "common/base/ids.hpp"
#include "common/config/lean_exec.hpp"
#include "common/work/lease.hpp"
#include "common/base/log.hpp"
#include "common/db/machine.hpp"
#include "common/db/migrate.hpp"
#include "common/db/notification_listener.hpp"
#include "common/hooks/plugin_config.hpp"
#include "common/hooks/plugin_roots.hpp"
#include "common/supervision/process_identity.hpp"
#include "common/recorder/self_registration.hpp"
#include "common/config/settings.hpp"
#include "common/base/stop_signals.hpp"
#include "common/recorder/supervisor.hpp"
#include "crawl_worker/crawl_run.hpp"
#include "crawl_worker/crawl_store.hpp"
#include "crawl_worker/crawl_wacz.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace orch {
namespace {

// After an unexpected failure (a worker that cannot start, a database error) the
// supervisor has torn our trees down: give the crawl back and close our row if the
// database still answers; main() reports the error itself.
void give_back_after_failure(pqxx::connection& conn, std::optional<Lease>& lease, const SelfRow& self, ExitCode code)
{
    try {
        if (lease) {
            // Not due at once: the orchestrator would claim it again before it has
            // even reaped us, and a failure that repeats would loop hot.
            lease->release(conn, failure_backoff(lease->attempts()));
        }
        close_self(conn, self, to_int(code));
    } catch (const std::exception& e) {
        log::warn("cannot release the crawl after a failure", {{"error", e.what()}});
    }
}

} // namespace

ExitCode run_crawl_worker(const CommonOptions& common, const CrawlWorkerOptions& options)
{
    auto crawl_id = require_uuid(options.crawl_id, "crawl id");
    WorkerStartup startup(common, options.process_id);
    const auto& adopt = startup.adopt();
    auto& stop = startup.stop();
    const auto& data_dir = startup.data_dir();
    auto& db = startup.database();
    auto& conn = db.conn();
    log::set_context("crawl", crawl_id);

    CrawlStore store(conn, crawl_id);
    auto crawl = store.load();
    if (!crawl) {
        throw NotFound(fmt::format("crawl {} not found", crawl_id));
    }
    if (crawl->status == "sealed") {
        log::info("crawl already sealed; nothing to do");
        return ExitCode::ok;
    }
    std::optional<std::string> cookie;
    if (const char* c = std::getenv(k_cookie_env_var); c != nullptr && *c != '\0') {
        cookie = c;
    }
    if (crawl->status == "paused") {
        // Paused between our orchestrator's claim and now: its lease goes back at once.
        // The same exit as a worker whose crawl was paused while it ran: not done, resumable.
        store.release_unstarted(adopt, cookie);
        log::warn(fmt::format("crawl is paused; nothing to do until `orchestrator resume {}`", crawl_id));
        return ExitCode::interrupted;
    }
    // Every setting is read before anything is written: a bad one changes nothing.
    // The snapshot workers' too: they inherit our environment, and each of them
    // would refuse its snapshot in turn.
    // From here on a lost connection is waited for (database_outage.hpp), hooks and workers running on.
    startup.check_settings();
    // Plugin problems surface here, before the crawl is claimed. The machine's own
    // (a config.json, a plugin) throw and leave the crawl due: fixing the machine
    // fixes every crawl. The crawl's own (its URL patterns, a plugin value its
    // snapshot workers would refuse too) cannot get better by retrying: the crawl
    // is paused, so that no daemon retries it forever.
    std::map<std::string, std::vector<ConfiguredHook>> hooks;
    if (auto problem = crawl_config_problem(crawl->config, plugin_roots(options.plugins_dir), &hooks)) {
        if (store.pause_refused(adopt, cookie, *problem)) {
            throw ConfigError(fmt::format("crawl {} paused: its configuration is refused: {} (fix the plugins and "
                                          "`orchestrator resume {}`, or cancel it)",
                                          crawl_id, *problem, crawl_id));
        }
        throw ConfigError(fmt::format("crawl {}: its configuration is refused: {}", crawl_id, *problem));
    }
    // Read with the plan, before the claim: a bad value is found before any work.
    const bool write_wacz = crawl_wacz_enabled(plugin_roots(options.plugins_dir), crawl->config);
    const auto& crawl_hooks = hooks["Crawl"];
    const auto& end_hooks = hooks["CrawlEnd"];
    auto grace = std::chrono::seconds(read_int_setting(setting::teardown_grace));
    int max_attempts = read_int_setting(setting::snapshot_max_attempts);
    const auto lease_ttl = lease_ttl_from_env();
    const auto max_log_bytes = read_setting(setting::hook_log_max_bytes);
    const auto host_rules = machine_host_rules();
    apply_host_rules(conn, host_rules);

    SelfRegistration reg;
    reg.worker_type = "crawl";
    reg.crawl_id = crawl_id;
    const auto& self = startup.register_self(reg);
    const auto& machine = startup.machine();
    set_event_machine_id(machine.id);

    ExitCode code = ExitCode::internal_error;
    std::optional<Lease> lease;
    try {
        lease = Lease::claim(conn, LeaseTable::crawl, crawl_id, self.id, lease_ttl);
        if (!lease) {
            log::warn("crawl is leased by another worker (or not runnable); not running it");
            code = ExitCode::lease_lost;
            close_self(conn, self, to_int(code));
            return code;
        }
        store.set_owner(self.id);
        Event started{"crawl.started", fmt::format("crawl claimed (attempt {})", lease->attempts()), crawl_id};
        started.process_id = self.id;
        started.detail = {{"attempt", lease->attempts()}, {"pid", ::getpid()}};
        record_event(conn, "crawl_worker", started);
        const auto sup = startup.supervisor_options(grace, max_log_bytes);
        Supervisor supervisor(conn, sup);

        CrawlRun::Context ctx;
        ctx.crawl = *store.load();
        // The machine's default per-host rules govern a crawl that has none of its own.
        ctx.crawl.host_limited = ctx.crawl.host_limited || host_rules.any();
        if (!ctx.crawl.host_delay_s) {
            ctx.crawl.host_delay_s = host_rules.delay_s();
        }
        ctx.data_dir = data_dir;
        ctx.crawl_dir = data_dir / "crawls" / crawl_id;
        ctx.max_workers = static_cast<std::size_t>(options.max_snapshot_workers);
        ctx.max_attempts = max_attempts;
        ctx.teardown_grace = grace;
        // A snapshot worker needs its own teardown grace plus time to record and release.
        ctx.worker_stop_grace = 2 * grace + std::chrono::seconds(5);
        ctx.snapshot_worker_exe = sibling_executable("snapshot_worker");
        ctx.worker_args = {"--data-dir", data_dir.string()};
        if (!options.plugins_dir.empty()) {
            ctx.worker_args.insert(ctx.worker_args.end(), {"--plugins-dir", options.plugins_dir});
        }
        ctx.worker_env = current_environment();
        if (!db.embedded()) {
            ctx.worker_private_env["DATABASE_URL"] = db.conninfo();
        }
        add_lean_exec_environment(ctx.worker_private_env);
        if (!common.machine_id.empty()) {
            ctx.worker_env["MACHINE_ID"] = common.machine_id;
        }
        ctx.machine_id = machine.id;
        ctx.self_row_id = self.id;
        ctx.containment = sup.containment;
        std::filesystem::create_directories(ctx.crawl_dir);
        CrawlRun run(ctx, supervisor, store, *lease, conn, stop);
        code = run.run(crawl_hooks, end_hooks);
        // Sealed, its CrawlEnd hooks done: its WARC files are final. A WACZ that
        // cannot be written is journalled; the crawl stays as it was sealed.
        if (code == ExitCode::ok && write_wacz) {
            write_crawl_wacz(conn, crawl_id, data_dir, ctx.crawl_dir, self.id);
        }
    } catch (const LeaseLost& e) {
        log::warn(e.what());
        code = ExitCode::lease_lost;
    } catch (const Error& e) {
        give_back_after_failure(conn, lease, self, e.code());
        throw;
    } catch (...) {
        give_back_after_failure(conn, lease, self, ExitCode::internal_error);
        throw;
    }
    close_self(conn, self, to_int(code));
    return code;
}

} // namespace orch
