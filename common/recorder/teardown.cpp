// Ending supervised trees: the foreground wait with timeout escalation and
// the three-phase teardown of a set of trees.
#include "common/recorder/supervisor.hpp"

#include "common/base/log.hpp"
#include "common/recorder/process_table.hpp"

#include <algorithm>
#include <poll.h>
#include <csignal>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string ms(Clock::duration d)
{
    return std::to_string(std::chrono::duration_cast<milliseconds>(d).count());
}

// Phase 1 for one tree. SIGCONT follows SIGTERM so a stopped process can act
// on it. Returns true when every member got the signal, false when only the
// leader did.
bool send_term(SupervisedTree& tree, TermTarget target)
{
    // Whether the stop can have ended the leader: one already exited ended on
    // its own (a signal to a zombie is accepted and does nothing).
    tree.stop_signalled = tree.stop_signalled || !tree.leader().has_exited();
    // A leader that has exited but is not reaped yet is a zombie: the kernel
    // accepts the signal, yet nobody is left to pass it on to the children.
    if (target == TermTarget::leader && !tree.leader().has_exited() && tree.signal_leader(SIGTERM)) {
        tree.signal_leader(SIGCONT);
        return false;
    }
    // No leader left to pass the signal on: every member gets it.
    tree.signal_tree(SIGTERM);
    tree.signal_tree(SIGCONT);
    return true;
}

// A timeout's phase 1, for wait() and keep_deadlines() alike: the tree is
// timed out from here on, and its SIGKILL is due at `kill_at`.
void stop_for_timeout(SupervisedTree& tree, Clock::time_point kill_at)
{
    tree.timed_out = true;
    tree.end_reason = "timed_out";
    send_term(tree, TermTarget::leader);
    tree.kill_at = kill_at;
}

struct TeardownEntry {
    std::string row_id;
    Clock::time_point deadline;
    Clock::time_point give_up = Clock::time_point::max();
    bool tree_termed = false; // every member has had its SIGTERM
    bool done = false;
};

} // namespace

ProcessOutcome Supervisor::wait(const std::string& row_id, std::optional<milliseconds> timeout,
                                std::optional<milliseconds> grace)
{
    // The deadlines keep their time through a database outage: what cannot be
    // written now is held for later (deferrable).
    OutageWaitsDeferred defer;
    if (auto done = m_done.find(row_id); done != m_done.end()) {
        auto outcome = done->second;
        m_done.erase(done);
        write_held_exits();
        return outcome;
    }
    SupervisedTree* tree = find(row_id);
    if (!tree) {
        throw std::out_of_range("not a supervised process: " + row_id);
    }
    tree->claimed = true;
    auto deadline = Clock::time_point::max();
    if (timeout) {
        deadline = Clock::now() + *timeout;
    } else if (auto remaining = tree->remaining(Clock::now())) {
        deadline = Clock::now() + *remaining;
    }
    // Where keep_deadlines() left the escalation, if it began it.
    auto kill_at = tree->kill_at.value_or(Clock::time_point::max());
    auto give_up = tree->killed ? Clock::now() + m_options.kill_timeout : Clock::time_point::max();
    // The exit write may still be on its way (or held) when the tree is done:
    // written and settled before returning.
    InFlightGuard guard{*this};
    for (;;) {
        handle_events();
        if (auto done = m_done.find(row_id); done != m_done.end()) {
            auto outcome = done->second;
            m_done.erase(done);
            deferrable([this] {
                send_held_exits();
                settle_write();
            });
            return outcome;
        }
        tree = find(row_id);
        const auto now = Clock::now();
        if (tree->leader_exit()) {
            if (tree->empty()) {
                finish(*tree, true);
                continue;
            }
            if (give_up == Clock::time_point::max()) {
                // The leader is done; whatever it left behind is a leak.
                log::warn("killing leftovers of exited process", {{"process", row_id}, {"name", tree->name()}});
                tree->kill_tree();
                give_up = now + m_options.kill_timeout;
            } else if (now >= give_up) {
                log::error("tree survived SIGKILL", {{"process", row_id}});
                finish(*tree, false);
                continue;
            }
        } else if (now >= deadline && kill_at == Clock::time_point::max()) {
            log::info("timeout: SIGTERM", {{"process", row_id}, {"name", tree->name()},
                                           {"elapsed_ms", ms(now - tree->started())}});
            kill_at = now + grace.value_or(m_options.teardown_grace);
            stop_for_timeout(*tree, kill_at);
        } else if (now >= kill_at && give_up == Clock::time_point::max()) {
            log::info("timeout grace over: SIGKILL tree", {{"process", row_id}, {"name", tree->name()}});
            tree->kill_tree();
            give_up = now + m_options.kill_timeout;
        } else if (now >= give_up) {
            // The leader itself survived SIGKILL (stuck in D state): never
            // reaped, so no exit was recorded; without this its row would
            // stay running. As teardown() does in the same case.
            log::error("tree survived SIGKILL", {{"process", row_id}});
            record_exit(row_id, {std::nullopt, std::nullopt, tree->end_reason, {}, {}}, tree->hold_exit);
            finish(*tree, false);
            continue;
        }
        // The next step's time: a step once taken is not waited for again
        // (the deadline stays in the past through the grace).
        wait_until(give_up != Clock::time_point::max()   ? give_up
                   : kill_at != Clock::time_point::max() ? kill_at
                                                         : deadline);
    }
}

std::optional<Clock::time_point> Supervisor::keep_deadlines()
{
    const auto now = Clock::now();
    std::optional<Clock::time_point> next;
    const auto sooner = [&next](Clock::time_point t) { next = next ? std::min(*next, t) : t; };
    for (auto& [row_id, tree] : m_trees) {
        // A claimed tree keeps its own deadlines (wait() and teardown() never
        // block on the database); a killed one only waits to be reaped.
        if (tree->claimed || tree->killed) {
            continue;
        }
        if (!tree->kill_at) {
            const auto remaining = tree->remaining(now);
            // No timeout, or a leader that ended on its own: its outcome is its own.
            if (!remaining || tree->leader().has_exited()) {
                continue;
            }
            if (*remaining > Clock::duration::zero()) {
                sooner(now + *remaining);
                continue;
            }
            log::warn("timeout while the database is unreachable: SIGTERM",
                      {{"process", row_id}, {"name", tree->name()}, {"elapsed_ms", ms(now - tree->started())}});
            stop_for_timeout(*tree, now + m_options.teardown_grace);
        }
        if (now >= *tree->kill_at) {
            if (tree->leader().has_exited() && !tree->has_members()) {
                continue; // the SIGTERM ended it all: nothing to kill
            }
            log::warn("timeout grace over while the database is unreachable: SIGKILL tree",
                      {{"process", row_id}, {"name", tree->name()}});
            tree->kill_tree();
            continue;
        }
        sooner(*tree->kill_at);
    }
    return next;
}

bool Supervisor::fast_stop_requested() const
{
    if (m_options.stop_signals == nullptr) {
        return false;
    }
    // Only looked at: the owner's loop still counts it.
    pollfd pfd{m_options.stop_signals->fd(), POLLIN, 0};
    return ::poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN) != 0;
}

std::vector<ProcessOutcome> Supervisor::teardown(const std::vector<std::string>& row_ids,
                                                 std::optional<milliseconds> grace, TermTarget term_target)
{
    OutageWaitsDeferred defer; // as in wait()
    InFlightGuard guard{*this};
    const auto t0 = Clock::now();
    const auto cap = grace.value_or(m_options.teardown_grace);
    std::vector<TeardownEntry> entries;
    const auto wanted = row_ids.empty() ? running() : row_ids;
    std::vector<ProcessOutcome> outcomes;
    for (const auto& id : wanted) {
        if (auto done = m_done.find(id); done != m_done.end()) {
            outcomes.push_back(done->second);
            m_done.erase(done);
            continue;
        }
        SupervisedTree* tree = find(id);
        if (!tree) {
            continue;
        }
        tree->claimed = true;
        const auto remaining = tree->remaining(t0).value_or(Clock::duration::max());
        const auto budget = std::min<Clock::duration>(remaining, cap);
        // A tree keep_deadlines() has killed already gets kill_timeout from now to empty.
        entries.push_back({id, t0 + budget, tree->killed ? t0 + m_options.kill_timeout : Clock::time_point::max()});
    }
    // Leaders that exited since the last events are reaped first, so phase 1
    // sees them gone and signals their trees instead.
    handle_events();
    // Phase 1: every tree at once, so the total is the largest deadline, not the sum.
    for (auto& entry : entries) {
        SupervisedTree* tree = find(entry.row_id);
        if (!tree) {
            continue; // ended just now; phase 2 collects it from m_done
        }
        log::info("teardown phase 1: SIGTERM", {{"process", entry.row_id}, {"name", tree->name()},
                                                {"pid", std::to_string(tree->pid())},
                                                {"deadline_ms", ms(entry.deadline - t0)}});
        entry.tree_termed = send_term(*tree, term_target);
    }
    // Phase 2: wait for each tree (every member, not just the leader) until
    // its own deadline; phase 3: SIGKILL what is still populated then.
    bool fast = false;
    for (;;) {
        handle_events();
        const auto now = Clock::now();
        if (!fast && fast_stop_requested()) {
            // A second stop request: nobody wants to wait for the graceful path any more.
            log::warn("teardown: stop requested again, killing every tree now", {{"trees", std::to_string(entries.size())}});
            for (auto& entry : entries) {
                entry.deadline = std::min(entry.deadline, now);
            }
            fast = true;
        }
        auto next = Clock::time_point::max();
        bool pending = false;
        for (auto& entry : entries) {
            if (entry.done) {
                continue;
            }
            SupervisedTree* tree = find(entry.row_id);
            if (!tree) {
                entry.done = true; // finished elsewhere (m_done holds it)
                continue;
            }
            if (tree->leader_exit() && tree->empty()) {
                log::info("teardown: tree gone", {{"process", entry.row_id}, {"name", tree->name()},
                                                  {"killed", tree->killed ? "true" : "false"},
                                                  {"elapsed_ms", ms(now - t0)}});
                if (tree->killed) {
                    record_exit(entry.row_id, {std::nullopt, std::nullopt, "killed_on_teardown", {}, {}},
                                tree->hold_exit);
                }
                finish(*tree, true);
                entry.done = true;
                continue;
            }
            if (!tree->killed && !entry.tree_termed && tree->leader_exit() && now < entry.deadline) {
                // The leader got the SIGTERM and is gone (a shell dies of it
                // without passing it on): the rest of the tree gets its own
                // chance to stop before its deadline, not just the SIGKILL.
                log::info("teardown: leader gone, SIGTERM to the rest of the tree",
                          {{"process", entry.row_id}, {"name", tree->name()}, {"elapsed_ms", ms(now - t0)}});
                tree->signal_tree(SIGTERM);
                tree->signal_tree(SIGCONT);
                entry.tree_termed = true;
            }
            if (!tree->killed && now >= entry.deadline) {
                log::info("teardown phase 3: SIGKILL tree", {{"process", entry.row_id}, {"name", tree->name()},
                                                             {"elapsed_ms", ms(now - t0)}});
                tree->end_reason = "killed_on_teardown";
                tree->kill_tree();
                entry.give_up = now + m_options.kill_timeout;
            } else if (tree->killed && now >= entry.give_up) {
                log::error("teardown: tree survived SIGKILL", {{"process", entry.row_id}, {"name", tree->name()}});
                record_exit(entry.row_id, {std::nullopt, std::nullopt, "killed_on_teardown", {}, {}},
                            tree->hold_exit);
                finish(*tree, false);
                entry.done = true;
                continue;
            }
            pending = true;
            next = std::min(next, tree->killed ? entry.give_up : entry.deadline);
        }
        if (!pending) {
            break;
        }
        wait_until(next);
    }
    for (const auto& entry : entries) {
        if (auto done = m_done.find(entry.row_id); done != m_done.end()) {
            outcomes.push_back(done->second);
            m_done.erase(done);
        }
    }
    deferrable([this] {
        send_held_exits();
        settle_write();
    });
    log::info("teardown complete", {{"trees", std::to_string(entries.size())}, {"elapsed_ms", ms(Clock::now() - t0)}});
    return outcomes;
}

} // namespace orch
