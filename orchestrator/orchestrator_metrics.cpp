#include "orchestrator/orchestrator_metrics.hpp"

#include "common/db/event_journal.hpp"
#include "common/base/log.hpp"
#include "orchestrator/metrics.hpp"

#include <pqxx/pqxx>

#include <memory>

namespace orch {
namespace {

const char* const k_types[] = {"orchestrator", "crawl_worker", "snapshot_worker", "worker", "hook", "cli", "server"};
const char* const k_states[] = {"queued", "running"};

constexpr const char* k_live =
    "SELECT ops.process_label(process_type, worker_type), status, count(*) FROM process "
    "WHERE machine_id = $1 AND status <> 'exited' GROUP BY 1, 2";
// Rows that ended in (after, now() - 10 s]; the lag lets transactions that set
// ended_at = now() commit before their rows are counted.
constexpr const char* k_exits =
    "SELECT type, outcome, duration_s, ended_at::text FROM ops.process_exits "
    "WHERE machine_id = $1 AND ended_at > $2::timestamptz AND ended_at <= $3::timestamptz ORDER BY ended_at";
// A process that started after the watermark is live now or ended after it: both index scans.
constexpr const char* k_spawns =
    "SELECT ops.process_label(process_type, worker_type), count(*) FROM ("
    "  SELECT process_type, worker_type, started_at FROM process WHERE machine_id = $1 AND status <> 'exited'"
    "  UNION ALL"
    "  SELECT process_type, worker_type, started_at FROM process"
    "  WHERE status = 'exited' AND ended_at > $2::timestamptz AND machine_id = $1) p "
    "WHERE started_at > $2::timestamptz AND started_at <= $3::timestamptz GROUP BY 1";

// Journal events of this machine in the same window (`at` is the writing
// transaction's start: the 10 s lag covers its commit).
constexpr const char* k_events =
    "SELECT kind, count(*) FROM event WHERE machine_id = $1 AND at > $2::timestamptz AND at <= $3::timestamptz "
    "GROUP BY kind";
// Kinds are exported from the start (at 0, k_event_kinds), so that rate() and alerts see them before their first event.

constexpr const char* k_window =
    "SELECT (now() - interval '10 seconds')::text, now() - interval '10 seconds' > $1::timestamptz";

void declare_global(metrics::Registry& r)
{
    r.describe("orchestrator_build_info", metrics::Type::gauge, "Build of the running orchestrator (always 1).");
    r.set("orchestrator_build_info", {{"version", PROJECT_VERSION_STRING}}, 1);
    r.describe("orchestrator_leases_recovered_total", metrics::Type::counter,
               "Crawl and snapshot leases freed by recovery because their owner was gone.");
    for (const char* kind : {"crawl", "snapshot"}) {
        r.add("orchestrator_leases_recovered_total", {{"kind", kind}}, 0);
    }
}

// Scrape-time reader of the process table; runs on the server thread only.
class ProcessCollector {
public:
    ProcessCollector(std::string conninfo, std::string machine_id)
        : m_conninfo(std::move(conninfo)), m_machine_id(std::move(machine_id))
    {
        using metrics::Type;
        m_registry.describe("orchestrator_processes", Type::gauge, "Process rows of this machine by type and state.");
        m_registry.describe("orchestrator_process_spawns_total", Type::counter, "Processes started on this machine.");
        m_registry.describe("orchestrator_process_exits_total", Type::counter,
                            "Processes of this machine that ended, by outcome (ok, failed, killed, timed_out, lost, "
                            "spawn_failed, not_started, unknown).");
        m_registry.describe("orchestrator_process_duration_seconds", Type::histogram,
                            "Runtime of processes of this machine that ended.",
                            {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600});
        m_registry.describe("orchestrator_events_total", Type::counter,
                            "Journal events of this machine by kind (ops.events): operator actions and the "
                            "processes' own decisions, such as snapshot.gave_up and crawl.backed_off.");
        for (const char* kind : k_event_kinds) {
            m_registry.add("orchestrator_events_total", {{"kind", kind}}, 0);
        }
        m_registry.describe("orchestrator_db_errors_total", Type::counter, "Database errors met by the metrics queries.");
        m_registry.add("orchestrator_db_errors_total", {{"component", "metrics"}}, 0);
        for (const char* type : k_types) {
            m_registry.add("orchestrator_process_spawns_total", {{"type", type}}, 0);
        }
        try {
            pqxx::read_transaction tx(connection());
            m_after = tx.exec1("SELECT now()::text")[0].as<std::string>();
        } catch (const std::exception& e) {
            note_error(e);
        }
    }

    std::string render()
    {
        try {
            collect();
        } catch (const std::exception& e) {
            note_error(e);
        }
        return m_registry.render();
    }

private:
    pqxx::connection& connection()
    {
        if (!m_conn || !m_conn->is_open()) {
            m_conn = std::make_unique<pqxx::connection>(m_conninfo);
            m_conn->prepare("metrics_live", k_live);
            m_conn->prepare("metrics_exits", k_exits);
            m_conn->prepare("metrics_spawns", k_spawns);
            m_conn->prepare("metrics_window", k_window);
            m_conn->prepare("metrics_events", k_events);
        }
        return *m_conn;
    }

    void note_error(const std::exception& e)
    {
        m_registry.add("orchestrator_db_errors_total", {{"component", "metrics"}});
        if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) {
            m_conn.reset();
        }
        log::warn("metrics query failed", {{"error", e.what()}});
    }

    void collect()
    {
        pqxx::read_transaction tx(connection());
        for (const char* type : k_types) {
            for (const char* state : k_states) {
                m_registry.set("orchestrator_processes", {{"type", type}, {"state", state}}, 0);
            }
        }
        for (const auto& row : tx.exec_prepared("metrics_live", m_machine_id)) {
            m_registry.set("orchestrator_processes", {{"type", row[0].as<std::string>()}, {"state", row[1].as<std::string>()}},
                           row[2].as<double>());
        }
        if (m_after.empty()) {
            m_after = tx.exec1("SELECT now()::text")[0].as<std::string>();
        }
        auto window = tx.exec_prepared1("metrics_window", m_after);
        if (!window[1].as<bool>()) {
            return;
        }
        auto until = window[0].as<std::string>();
        for (const auto& row : tx.exec_prepared("metrics_spawns", m_machine_id, m_after, until)) {
            m_registry.add("orchestrator_process_spawns_total", {{"type", row[0].as<std::string>()}},
                           row[1].as<double>());
        }
        for (const auto& row : tx.exec_prepared("metrics_exits", m_machine_id, m_after, until)) {
            auto type = row[0].as<std::string>();
            m_registry.add("orchestrator_process_exits_total", {{"type", type}, {"outcome", row[1].as<std::string>()}});
            if (!row[2].is_null()) {
                m_registry.observe("orchestrator_process_duration_seconds", {{"type", type}}, row[2].as<double>());
            }
        }
        for (const auto& row : tx.exec_prepared("metrics_events", m_machine_id, m_after, until)) {
            m_registry.add("orchestrator_events_total", {{"kind", row[0].as<std::string>()}}, row[1].as<double>());
        }
        m_after = until;
    }

    std::string m_conninfo;
    std::string m_machine_id;
    std::unique_ptr<pqxx::connection> m_conn;
    std::string m_after; // watermark: events at or before it are counted
    metrics::Registry m_registry;
};

} // namespace

void count_leases_recovered(long crawls, long snapshots)
{
    static std::once_flag declared;
    std::call_once(declared, [] { declare_global(metrics::global()); });
    metrics::global().add("orchestrator_leases_recovered_total", {{"kind", "crawl"}}, static_cast<double>(crawls));
    metrics::global().add("orchestrator_leases_recovered_total", {{"kind", "snapshot"}}, static_cast<double>(snapshots));
}

std::unique_ptr<MetricsServer> start_orchestrator_metrics(const std::string& listen, const std::string& conninfo,
                                                          const std::string& machine_id)
{
    count_leases_recovered(0, 0); // declares the global families
    auto collector = std::make_shared<ProcessCollector>(conninfo, machine_id);
    auto server = std::make_unique<MetricsServer>(listen, [collector] {
        return metrics::global().render() + collector->render();
    });
    log::info("metrics listening", {{"address", listen}, {"port", std::to_string(server->port())}});
    return server;
}

} // namespace orch
