// The chaos suite's judge, judged: known-bad runs, built as database rows and
// hook record files in a TrialSandbox (no orchestrator runs), each must produce
// its violation, and a good run none; and the report must fail a run whose
// faults were not injected.
#include "tests/chaos/chaos_hooks.hpp"
#include "tests/chaos/chaos_report.hpp"
#include "tests/chaos/db_query.hpp"
#include "tests/chaos/invariants.hpp"
#include "tests/chaos/trial_sandbox.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/spawned_process.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace orch::chaos;
namespace fs = std::filesystem;

// Nanoseconds since the epoch of a moment `ms` into the made-up run.
long long at_ms(long long ms)
{
    return 1'700'000'000'000'000'000LL + ms * 1'000'000LL;
}

// A finished crawl as the system leaves it: sealed, its snapshots sealed, an
// orchestrator, a crawl worker and a snapshot worker that exited 0, and for
// every hook run an exited row and its start/end records. Pids are far above
// any pid_max, so no live process can be taken for one of the run's.
class KnownRun {
public:
    explicit KnownRun(std::vector<std::string> urls) : m_sandbox("judge"), m_urls(std::move(urls))
    {
        sql("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ('judge', 'judge', 'boot', 1)");
        std::string array;
        for (const auto& u : m_urls) {
            array += (array.empty() ? "'" : ",'") + u + "'";
        }
        m_crawl = scalar(m_sandbox.db_url(),
                         "INSERT INTO crawl (urls, status, outcome, retry_at, sealed_at) VALUES (ARRAY[" + array +
                             "], 'sealed', 'succeeded', NULL, now()) RETURNING id");
        m_orchestrator = process("orchestrator", "NULL", "NULL", 9'000'001);
        m_crawl_worker = process("worker", "'crawl'", "'" + m_orchestrator + "'", 9'000'002);
        m_snapshot_worker = process("worker", "'snapshot'", "'" + m_crawl_worker + "'", 9'000'003);
    }

    TrialSandbox& sandbox() { return m_sandbox; }
    const std::string& crawl() const { return m_crawl; }
    const std::string& snapshot_worker() const { return m_snapshot_worker; }

    void sql(const std::string& statement) { query(m_sandbox.db_url(), statement); }

    // An exited process row (exit 0 unless `exit_code` says otherwise); returns its id.
    std::string process(const std::string& type, const std::string& worker_type, const std::string& parent, int pid,
                        const std::string& exit_code = "0", const std::string& extra_columns = "",
                        const std::string& extra_values = "")
    {
        return scalar(m_sandbox.db_url(),
                      "INSERT INTO process (machine_id, process_type, worker_type, parent_id, status, pid, cookie, "
                      "exit_code, crawl_id, started_at, ended_at" + extra_columns + ") VALUES ('judge', '" + type +
                          "', " + worker_type + ", " + parent + ", 'exited', " + std::to_string(pid) +
                          ", gen_random_uuid()::text, " + exit_code + ", '" + m_crawl + "', now(), now()" +
                          extra_values + ") RETURNING id");
    }

    // A sealed snapshot of `url` with a succeeded archive_result for `labels`.
    std::string snapshot(const std::string& url, const std::vector<std::string>& labels = {})
    {
        auto id = scalar(m_sandbox.db_url(), "INSERT INTO snapshot (crawl_id, url, status, outcome, retry_at, "
                                             "attempts, started_at, sealed_at) VALUES ('" + m_crawl + "', '" + url +
                                                 "', 'sealed', 'succeeded', NULL, 1, now(), now()) RETURNING id");
        m_url_of[id] = url;
        for (const auto& label : labels) {
            sql("INSERT INTO archive_result (snapshot_id, plugin, hook_name, status) VALUES ('" + id +
                "', 'chaos', '" + hook_name(label) + "', 'succeeded')");
        }
        return id;
    }

    // The exited row of one hook run under `worker` (the snapshot worker by default).
    std::string hook_row(const std::string& snap, const std::string& label, int pid, std::string worker = "")
    {
        if (worker.empty()) {
            worker = m_snapshot_worker;
        }
        return process("hook", "NULL", "'" + worker + "'", pid, "0", ", snapshot_id, plugin, hook_name",
                       ", '" + snap + "', 'chaos', '" + hook_name(label) + "'");
    }

    // Appends one line to the records of (snapshot, hook), as the stand-in hooks do.
    void record(const std::string& snap, const std::string& label, const std::string& line)
    {
        std::ofstream(m_sandbox.records() / (snap + "." + label), std::ios::app) << line << "\n";
    }
    void start(const std::string& snap, const std::string& label, int pid, long long ms)
    {
        record(snap, label, "start " + std::to_string(pid) + " " + std::to_string(at_ms(ms)) + " " + m_url_of[snap]);
    }
    void end(const std::string& snap, const std::string& label, int pid, long long ms)
    {
        record(snap, label, "end " + std::to_string(pid) + " " + std::to_string(at_ms(ms)) + " ok");
    }
    // One succeeded hook run: its row and its records.
    void hook_run(const std::string& snap, const std::string& label, int pid, long long from_ms, long long to_ms)
    {
        hook_row(snap, label, pid);
        start(snap, label, pid, from_ms);
        end(snap, label, pid, to_ms);
    }

    // Every URL sealed but those in `apart` (whose snapshots the test makes), each
    // snapshot's fetch then extract, one snapshot after another.
    std::vector<std::string> good(std::size_t apart = 0)
    {
        std::vector<std::string> snaps;
        long long t = 0;
        int pid = 9'100'000;
        for (std::size_t i = apart; i < m_urls.size(); ++i) {
            auto snap = snapshot(m_urls[i], {"fetch", "extract"});
            hook_run(snap, "fetch", ++pid, t, t + 200);
            hook_run(snap, "extract", ++pid, t + 210, t + 300);
            t += 400;
            snaps.push_back(snap);
        }
        return snaps;
    }

    InvariantReport check(const HostRules& rules = {}) { return check_invariants(m_sandbox, {m_crawl}, m_urls.size(), rules); }

private:
    static std::string hook_name(const std::string& label)
    {
        return "on_Snapshot__" + std::string(label == "fetch" ? "10_" : "20_") + label + ".sh";
    }

    TrialSandbox m_sandbox;
    std::vector<std::string> m_urls;
    std::string m_crawl;
    std::string m_orchestrator;
    std::string m_crawl_worker;
    std::string m_snapshot_worker;
    std::map<std::string, std::string> m_url_of;  // snapshot id -> URL
};

const std::vector<std::string> k_two_urls = {"http://judge.test/1", "http://judge.test/2"};
const std::vector<std::string> k_three_urls = {"http://judge.test/1", "http://judge.test/2", "http://judge.test/3"};

// The violations whose invariant is `name` ("name: ...").
std::vector<std::string> of(const InvariantReport& r, const std::string& name)
{
    std::vector<std::string> out;
    std::copy_if(r.violations.begin(), r.violations.end(), std::back_inserter(out),
                 [&](const std::string& v) { return v.rfind(name + ": ", 0) == 0; });
    return out;
}

std::string all(const InvariantReport& r)
{
    std::string out;
    for (const auto& v : r.violations) {
        out += "violation " + v + "\n";
    }
    for (const auto& n : r.notes) {
        out += "note " + n + "\n";
    }
    return out;
}

} // namespace

TEST_CASE("a good run breaks no invariant", "[chaos_judge]")
{
    KnownRun run(k_two_urls);
    run.good();
    auto r = run.check();
    INFO(all(r));
    CHECK(r.violations.empty());
    CHECK(r.notes.empty());
}

TEST_CASE("two runs of one hook at once are an overlap", "[chaos_judge]")
{
    KnownRun run(k_three_urls);
    auto snaps = run.good(1);
    SECTION("a second run starts before the first one's end")
    {
        // A retry by another worker while the first run was still going (no flock marker).
        auto snap = run.snapshot("http://judge.test/1", {"fetch"});
        run.hook_row(snap, "fetch", 9'200'001);
        run.hook_row(snap, "fetch", 9'200'002);
        run.start(snap, "fetch", 9'200'001, 0);
        run.start(snap, "fetch", 9'200'002, 50);
        run.end(snap, "fetch", 9'200'001, 200);
        run.end(snap, "fetch", 9'200'002, 250);
        auto r = run.check();
        INFO(all(r));
        CHECK(of(r, "overlap").size() == 1);
    }
    SECTION("the hook saw the earlier run's lock still held")
    {
        run.record(snaps[1], "fetch", "overlap 9200002 " + std::to_string(at_ms(500)));
        run.snapshot("http://judge.test/1");
        auto r = run.check();
        INFO(all(r));
        CHECK(of(r, "overlap").size() == 1);
    }
}

TEST_CASE("a hook run again after a success its worker recorded is a rerun", "[chaos_judge]")
{
    KnownRun run(k_two_urls);
    auto snaps = run.good();
    run.hook_run(snaps[0], "fetch", 9'200'003, 5'000, 5'200);
    auto r = run.check();
    INFO(all(r));
    CHECK(of(r, "rerun").size() == 1);
    CHECK(r.notes.empty());
}

TEST_CASE("a rerun whose earlier run left no trace in the process table is a violation", "[chaos_judge]")
{
    KnownRun run(k_two_urls);
    run.good(1);
    // The earlier run: records only, no row (with or without its pid) for it.
    auto snap = run.snapshot(k_two_urls[0], {"fetch"});
    run.start(snap, "fetch", 9'200'004, 1'000);
    run.end(snap, "fetch", 9'200'004, 1'100);
    run.hook_run(snap, "fetch", 9'200'005, 1'200, 1'300);
    auto r = run.check();
    INFO(all(r));
    CHECK(of(r, "rerun").size() == 1);
}

TEST_CASE("a rerun after a success whose worker died before writing it is a note", "[chaos_judge]")
{
    KnownRun run(k_two_urls);
    run.good(1);
    auto snap = run.snapshot(k_two_urls[0], {"fetch"});
    // The worker was killed before its deferred write: the hook's row never got
    // its pid (closed queued by recovery), the worker's row says SIGKILL.
    auto killed = run.process("worker", "'snapshot'", "NULL", 9'000'010, "NULL", ", term_signal, end_reason",
                              ", 9, 'lost'");
    run.process("hook", "NULL", "'" + killed + "'", 1, "NULL", ", snapshot_id, plugin, hook_name",
                ", '" + snap + "', 'chaos', 'on_Snapshot__10_fetch.sh'");
    run.sql("UPDATE process SET pid = NULL WHERE parent_id = '" + killed + "'");
    run.start(snap, "fetch", 9'200'006, 2'000);
    run.end(snap, "fetch", 9'200'006, 2'100);
    run.hook_run(snap, "fetch", 9'200'007, 9'000, 9'200);
    auto r = run.check();
    INFO(all(r));
    CHECK(r.violations.empty());
    CHECK(r.notes.size() == 1);
}

TEST_CASE("a live process of the run is a leftover", "[chaos_judge]")
{
    KnownRun run(k_two_urls);
    run.good();
    auto cookie = scalar(run.sandbox().db_url(), "SELECT cookie FROM process WHERE process_type = 'hook' LIMIT 1");
    orch::test::SpawnedProcess left({"/bin/sleep", "60"}, {{"ORCH_PROCESS_COOKIE", cookie}});
    auto r = run.check();
    INFO(all(r));
    CHECK(of(r, "leftover").size() == 1);
    left.signal(SIGKILL);
    left.wait_for(std::chrono::seconds(5));
}

TEST_CASE("a process row still running after the run is stale", "[chaos_judge]")
{
    KnownRun run(k_two_urls);
    run.good();
    run.sql("UPDATE process SET status = 'running', ended_at = NULL, exit_code = NULL WHERE id = '" +
            run.snapshot_worker() + "'");
    auto r = run.check();
    INFO(all(r));
    REQUIRE(of(r, "stale_row").size() == 1);
    CHECK(of(r, "stale_row")[0].find("dead pid") != std::string::npos);
}

TEST_CASE("a URL given without its snapshot is lost", "[chaos_judge]")
{
    KnownRun run({"http://judge.test/1", "http://judge.test/2", "http://judge.test/3"});
    auto snap = run.snapshot("http://judge.test/1", {"fetch"});
    run.hook_run(snap, "fetch", 9'200'008, 0, 100);
    run.snapshot("http://judge.test/2");
    auto r = run.check();
    INFO(all(r));
    CHECK(of(r, "lost").size() == 1);
}

TEST_CASE("a run without its hooks' records is a violation", "[chaos_judge]")
{
    KnownRun run(k_two_urls);
    run.good();
    SECTION("no records folder")
    {
        fs::remove_all(run.sandbox().records());
    }
    SECTION("an empty records folder under succeeded results")
    {
        for (const auto& entry : fs::directory_iterator(run.sandbox().records())) {
            fs::remove(entry.path());
        }
    }
    auto r = run.check();
    INFO(all(r));
    CHECK(of(r, "records").size() == 1);
}

namespace {

// `n` URLs over the hosts a.test and b.test (odd on a, even on b).
std::vector<std::string> two_hosts(int n)
{
    std::vector<std::string> urls;
    for (int i = 1; i <= n; ++i) {
        urls.push_back("http://" + std::string(i % 2 ? "a" : "B") + ".test/" + std::to_string(i));
    }
    return urls;
}

} // namespace

TEST_CASE("more snapshots of one host running at once than max_per_host is impolite", "[chaos_judge]")
{
    // Each snapshot's fetch runs 1 s; they start `gap` ms apart, one host's then the other's.
    auto urls = two_hosts(6);
    KnownRun run(urls);
    auto make = [&](long long gap) {
        int pid = 9'300'000;
        for (std::size_t i = 0; i < urls.size(); ++i) {
            auto snap = run.snapshot(urls[i], {"fetch"});
            const auto t = static_cast<long long>(i / 2) * gap;
            run.hook_run(snap, "fetch", ++pid, t, t + 1'000);
        }
    };
    SECTION("three of a host at once")
    {
        make(400);
        auto r = run.check({2, 0});
        INFO(all(r));
        REQUIRE(of(r, "politeness").size() == 2);
        CHECK(of(r, "politeness")[0].find("3 snapshots of a.test") != std::string::npos);
        CHECK(of(r, "politeness")[1].find("3 snapshots of b.test") != std::string::npos);  // the host lower-cased
        CHECK(r.most_per_host == 3);
    }
    SECTION("two at once, the third starting as the first ends")
    {
        make(500);
        auto r = run.check({2, 0});
        INFO(all(r));
        CHECK(r.violations.empty());
        CHECK(r.most_per_host == 2);
    }
    SECTION("a killed run counts at its start")
    {
        // Two runs without their end records (killed) starting with a third.
        make(2'000);
        auto a = run.snapshot("http://a.test/7", {});
        run.start(a, "fetch", 9'301'000, 4'000);
        auto b = run.snapshot("http://a.test/9", {});
        run.start(b, "fetch", 9'301'001, 4'000);
        auto r = run.check({2, 0});
        INFO(all(r));
        CHECK(of(r, "politeness").size() == 1);
    }
}

TEST_CASE("snapshots of one host started closer than host_delay allows are impolite", "[chaos_judge]")
{
    // Ten snapshots of a.test whose runs of 50 ms start `gap` ms apart, host_delay 0.5 s, max_per_host 2:
    // claims span 4.5 s; the check allows 2 held back and 1 s of spawn: (10 - 1 - 2) * 0.5 - 1 = 2.5 s.
    std::vector<std::string> urls;
    for (int i = 1; i <= 10; ++i) {
        urls.push_back("http://a.test/" + std::to_string(i));
    }
    KnownRun run(urls);
    auto make = [&](long long gap) {
        int pid = 9'400'000;
        for (std::size_t i = 0; i < urls.size(); ++i) {
            auto snap = run.snapshot(urls[i], {"fetch"});
            const auto t = static_cast<long long>(i) * gap;
            run.hook_run(snap, "fetch", ++pid, t, t + 50);
        }
    };
    SECTION("100 ms apart")
    {
        make(100);
        auto r = run.check({2, 0.5});
        INFO(all(r));
        CHECK(of(r, "politeness").size() == 1);
    }
    SECTION("500 ms apart")
    {
        make(500);
        auto r = run.check({2, 0.5});
        INFO(all(r));
        CHECK(r.violations.empty());
    }
}

namespace {

TrialResult trial(int index, FaultKind kind, bool injected)
{
    TrialResult t;
    t.index = index;
    t.kind = kind;
    t.injected = injected;
    t.detail = injected ? "struck" : "no target";
    return t;
}

} // namespace

TEST_CASE("a fault that was not injected is reported - too few of a kind fail the run", "[chaos_judge]")
{
    std::vector<TrialResult> trials = {trial(1, FaultKind::kill_hook, true), trial(2, FaultKind::kill_hook, false),
                                       trial(3, FaultKind::pg_stop, false), trial(4, FaultKind::pg_stop, false),
                                       trial(5, FaultKind::kill_hook, false)};
    SECTION("quick: a kind never injected")
    {
        CHECK(kinds_short_of_injections(trials, InjectionRule::once_per_kind) ==
              std::vector<std::string>{"pg_stop 0/2"});
        std::ostringstream out;
        auto verdict = print_report(out, trials, {}, 1, InjectionRule::once_per_kind);
        INFO(out.str());
        CHECK(verdict.violations == 0);
        CHECK_FALSE(verdict.passed());
        CHECK(out.str().find("trial 2 kill_hook (0 URLs, one-shot) NOT INJECTED: no target") != std::string::npos);
        CHECK(out.str().find("1/3") != std::string::npos);
        CHECK(out.str().find("fault kinds injected too few times: pg_stop 0/2") != std::string::npos);
    }
    SECTION("full: fewer than half of a kind's trials injected")
    {
        CHECK(kinds_short_of_injections(trials, InjectionRule::half_of_each_kind) ==
              std::vector<std::string>{"kill_hook 1/3", "pg_stop 0/2"});
        trials.push_back(trial(6, FaultKind::kill_hook, true));
        trials.push_back(trial(7, FaultKind::pg_stop, true));
        trials.push_back(trial(8, FaultKind::pg_stop, true));  // 2/4 and 2/4: half of each
        CHECK(kinds_short_of_injections(trials, InjectionRule::half_of_each_kind).empty());
        std::ostringstream out;
        CHECK(print_report(out, trials, {}, 1, InjectionRule::half_of_each_kind).passed());
    }
}

TEST_CASE("a hostile hook is injected only where it ran on the URLs it misbehaves on", "[chaos_judge]")
{
    orch::test::ScratchDir records("orch-chaos-hostile-");
    auto write = [&](const std::string& file, const std::string& url) {
        std::ofstream(records.path() / file, std::ios::app) << "start 1 2 " << url << "\n";
    };
    write("s1.hostile", "http://chaos.test/1/4");
    write("s2.fetch", "http://chaos.test/1/5");
    CHECK(hostile_runs(records.path(), FaultKind::hook_hang) == 0);
    write("s3.hostile", "http://chaos.test/1/10");
    CHECK(hostile_runs(records.path(), FaultKind::hook_hang) == 1);
    CHECK(hostile_runs(records.path(), FaultKind::hook_fork) == 0);  // only on /5
    write("s4.hostile", "http://chaos.test/1/5");
    CHECK(hostile_runs(records.path(), FaultKind::hook_fork) == 1);
    CHECK(hostile_runs(records.path() / "gone", FaultKind::hook_hang) == 0);
}
