#include "tests/ops/ops_fixture.hpp"

#include "tests/support/db_query.hpp"
#include "common/db/machine.hpp"
#include "common/supervision/process_identity.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <unistd.h>

namespace orch::test {

OpsTree::OpsTree() : m_dir("orch-ops-"), m_machine(fmt::format("ops-test-{}", ::getpid()))
{
    using namespace ops_ids;
    auto self = read_proc_stat(::getpid());
    std::ofstream(m_dir / "h2.stderr.log") << "line 1\nline 2\nline 3\nwarning: slow\nfatal: boom\n";
    std::ofstream(m_dir / "h3.stdout.log") << "title: start\n";
    auto conn = m_db.connect();
    pqxx::work tx(*conn);
    tx.exec_params0("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ($1, 'test', $2, 2)", m_machine,
                    read_boot_id());
    tx.exec_params0(
        "INSERT INTO crawl (id, urls, status, started_at, lease_owner, lease_expires_at) VALUES "
        " ($1, '{http://a.test/}', 'started', now() - interval '5 minutes', $2, now() + interval '1 hour'),"
        " ($3, '{http://b.test/}', 'queued', NULL, NULL, NULL)",
        c1, crawl_worker, c2);
    tx.exec_params0(
        "INSERT INTO snapshot (id, crawl_id, url, status, outcome, error, sealed_at, lease_owner, lease_expires_at) VALUES"
        " ($1, $5, 'http://a.test/', 'sealed', 'succeeded', NULL, now() - interval '1 minute', NULL, NULL),"
        " ($2, $5, 'http://a.test/2', 'sealed', 'failed', 'wget failed', now() - interval '30 seconds', NULL, NULL),"
        " ($3, $5, 'http://a.test/3', 'started', NULL, NULL, NULL, $7, now() + interval '1 hour'),"
        " ($4, $6, 'http://b.test/', 'queued', NULL, NULL, NULL, NULL, NULL)",
        s1, s2, s3, s4, c1, c2, sw3);
    tx.exec_params0(
        "INSERT INTO archive_result (snapshot_id, plugin, hook_name, status, error, start_ts, end_ts) VALUES"
        " ($1, 'wget', 'on_Snapshot__50_wget', 'succeeded', NULL, now() - interval '70 s', now() - interval '65 s'),"
        " ($1, 'title', 'on_Snapshot__10_title', 'succeeded', NULL, now() - interval '70 s', now() - interval '69 s'),"
        " ($2, 'wget', 'on_Snapshot__50_wget', 'failed', 'boom', now() - interval '60 s', now() - interval '31 s'),"
        " ($2, 'title', 'on_Snapshot__10_title', 'succeeded', NULL, now() - interval '60 s', now() - interval '59 s'),"
        " ($3, 'title', 'on_Snapshot__10_title', 'started', NULL, now() - interval '5 s', NULL),"
        " ($4, 'title', 'on_Snapshot__10_title', 'queued', NULL, NULL, NULL)",
        s1, s2, s3, s4);
    // created_at spaced so that siblings sort in a known order.
    auto insert = [&](const std::string& id, const std::string& parent, const std::string& values) {
        tx.exec0(fmt::format(
            "INSERT INTO process (id, parent_id, machine_id, process_type, worker_type, status, pid, boot_id, "
            " start_ticks, crawl_id, snapshot_id, plugin, hook_name, exit_code, term_signal, end_reason, stdout_path, "
            " stderr_path, stdout_tail, stderr_tail, created_at, started_at, ended_at, heartbeat_at) VALUES "
            "({}, {}, {}, {})",
            tx.quote(id), parent.empty() ? "NULL" : tx.quote(parent), tx.quote(m_machine), values));
    };
    auto q = [&](const std::string& s) { return tx.quote(s); };
    auto dir = m_dir.path().string();
    insert(orchestrator, "",
           fmt::format("'orchestrator', NULL, 'running', {}, {}, {}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
                       "NULL, NULL, NULL, now() - interval '10 min', now() - interval '10 min', NULL, now()",
                       ::getpid(), q(read_boot_id()), self->start_ticks));
    insert(crawl_worker, orchestrator,
           fmt::format("'worker', 'crawl', 'running', 999001, NULL, NULL, {}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
                       "NULL, NULL, NULL, now() - interval '9 min', now() - interval '5 min', NULL, now()",
                       q(c1)));
    insert(sw1, crawl_worker,
           fmt::format("'worker', 'snapshot', 'exited', 999002, NULL, NULL, {}, {}, NULL, NULL, 0, NULL, 'exited', NULL, "
                       "NULL, NULL, NULL, now() - interval '8 min', now() - interval '71 s', now() - interval '64 s', NULL",
                       q(c1), q(s1)));
    insert(h1, sw1,
           fmt::format("'hook', NULL, 'exited', 999003, NULL, NULL, {}, {}, 'wget', 'on_Snapshot__50_wget', 0, NULL, "
                       "'exited', {}, NULL, 'saved index.html\n', NULL, now() - interval '7 min', now() - interval '70 s', "
                       "now() - interval '65 s', NULL",
                       q(c1), q(s1), q(dir + "/h1.stdout.log")));
    insert(sw2, crawl_worker,
           fmt::format("'worker', 'snapshot', 'exited', 999004, NULL, NULL, {}, {}, NULL, NULL, 1, NULL, 'exited', NULL, "
                       "NULL, NULL, NULL, now() - interval '6 min', now() - interval '61 s', now() - interval '30 s', NULL",
                       q(c1), q(s2)));
    insert(h2, sw2,
           fmt::format("'hook', NULL, 'exited', 999005, NULL, NULL, {}, {}, 'wget', 'on_Snapshot__50_wget', 137, 9, "
                       "'timed_out', NULL, {}, NULL, 'warning: slow\nfatal: boom\n', now() - interval '5 min', "
                       "now() - interval '60 s', now() - interval '31 s', NULL",
                       q(c1), q(s2), q(dir + "/h2.stderr.log")));
    insert(sw3, crawl_worker,
           fmt::format("'worker', 'snapshot', 'running', 999006, NULL, NULL, {}, {}, NULL, NULL, NULL, NULL, NULL, NULL, "
                       "NULL, NULL, NULL, now() - interval '4 min', now() - interval '6 s', NULL, now()",
                       q(c1), q(s3)));
    insert(h3, sw3,
           fmt::format("'hook', NULL, 'running', 999007, NULL, NULL, {}, {}, 'title', 'on_Snapshot__10_title', NULL, "
                       "NULL, NULL, {}, NULL, NULL, NULL, now() - interval '3 min', now() - interval '5 s', NULL, now()",
                       q(c1), q(s3), q(dir + "/h3.stdout.log")));
    tx.commit();
}

CommandResult OpsTree::run(std::vector<std::string> args) const
{
    std::vector<std::string> argv{bin_path("orchestrator").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--database-url", m_db.url(), "--data-dir", (m_dir / "data").string(), "--machine-id",
                             m_machine});
    return run_command(argv);
}

void OpsTree::exec(const std::string& sql) const
{
    execute(*m_db.connect(), sql);
}

std::string OpsTree::scalar(const std::string& sql) const
{
    return value(*m_db.connect(), sql).value_or("NULL");
}

std::vector<std::string> lines_of(const std::string& text)
{
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        out.push_back(line);
    }
    return out;
}

} // namespace orch::test
