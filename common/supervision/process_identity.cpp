#include "common/supervision/process_identity.hpp"

#include "common/base/fd.hpp"

#include <cerrno>
#include <sstream>
#include <system_error>

#include <time.h>
#include <unistd.h>

namespace orch {
namespace {

std::string read_small_file(const std::string& path, bool& ok)
{
    auto text = read_whole_file(path);
    ok = text.has_value();
    return text.value_or(std::string());
}

} // namespace

std::string read_boot_id()
{
    bool ok = false;
    auto id = read_small_file("/proc/sys/kernel/random/boot_id", ok);
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ' || id.back() == '\r')) {
        id.pop_back();
    }
    if (id.empty()) {
        throw std::system_error(errno ? errno : ENOENT, std::generic_category(), "read boot_id");
    }
    return id;
}

std::int64_t boottime_ns() noexcept
{
    timespec now{};
    ::clock_gettime(CLOCK_BOOTTIME, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

std::optional<std::uint64_t> start_ticks_between(std::int64_t before_ns, std::int64_t after_ns) noexcept
{
    // /proc reports nsec_to_clock_t(start_boottime): a truncating division by
    // the nanoseconds of one USER_HZ tick.
    static const std::int64_t ns_per_tick = 1'000'000'000 / ::sysconf(_SC_CLK_TCK);
    if (before_ns < 0 || after_ns < before_ns || before_ns / ns_per_tick != after_ns / ns_per_tick) {
        return std::nullopt;
    }
    return static_cast<std::uint64_t>(before_ns / ns_per_tick);
}

std::optional<ProcStat> read_proc_stat(pid_t pid)
{
    bool ok = false;
    const std::string text = read_small_file("/proc/" + std::to_string(pid) + "/stat", ok);
    // comm is "(...)" and may itself contain ") ", so the fields start after the last ')'.
    const auto close = text.rfind(')');
    if (!ok || close == std::string::npos) {
        return std::nullopt;
    }
    std::istringstream fields(text.substr(close + 1));
    ProcStat stat;
    std::string skip;
    fields >> stat.state >> stat.ppid >> stat.pgid;
    for (int field = 6; field < 22; ++field) {
        fields >> skip;
    }
    fields >> stat.start_ticks;
    if (!fields) {
        return std::nullopt;
    }
    return stat;
}

std::optional<std::string> read_environ_value(pid_t pid, std::string_view name)
{
    bool ok = false;
    const std::string text = read_small_file("/proc/" + std::to_string(pid) + "/environ", ok);
    if (!ok) {
        return std::nullopt;
    }
    std::size_t begin = 0;
    while (begin < text.size()) {
        auto end = text.find('\0', begin);
        if (end == std::string::npos) {
            end = text.size();
        }
        const std::string_view entry(text.data() + begin, end - begin);
        if (entry.size() > name.size() && entry.substr(0, name.size()) == name && entry[name.size()] == '=') {
            return std::string(entry.substr(name.size() + 1));
        }
        begin = end + 1;
    }
    return std::nullopt;
}

std::optional<ProcessIdentity> capture_identity(const Pidfd& pidfd, const std::string& boot_id,
                                                std::optional<std::string> cookie)
{
    const auto stat = read_proc_stat(pidfd.pid());
    // The stat read could race with exit and pid reuse; checking the pidfd
    // afterwards proves the stat belonged to the still-living process.
    if (!stat || pidfd.has_exited()) {
        return std::nullopt;
    }
    ProcessIdentity identity;
    identity.pid = pidfd.pid();
    identity.boot_id = boot_id;
    identity.start_ticks = stat->start_ticks;
    identity.pidfs_ino = pidfd.inode();
    identity.cookie = std::move(cookie);
    return identity;
}

VerifiedProcess verify_identity(const ProcessIdentity& expected, const std::string& current_boot_id)
{
    if (expected.boot_id != current_boot_id) {
        return {IdentityVerdict::boot_changed, std::nullopt};
    }
    auto pidfd = Pidfd::open(expected.pid);
    if (!pidfd) {
        return {IdentityVerdict::gone, std::nullopt};
    }
    const auto stat = read_proc_stat(expected.pid);
    if (!stat || pidfd->has_exited() || stat->state == 'Z') {
        return {IdentityVerdict::gone, std::nullopt};
    }
    // From here the pidfd pins the process we read, so the comparisons below
    // cannot be fooled by a reuse that happens after them.
    if (stat->start_ticks != expected.start_ticks) {
        return {IdentityVerdict::reused, std::nullopt};
    }
    const auto inode = pidfd->inode();
    if (expected.pidfs_ino && inode) {
        if (*inode != *expected.pidfs_ino) {
            return {IdentityVerdict::reused, std::nullopt};
        }
    } else if (expected.cookie) {
        // Start ticks have 10 ms resolution; without an inode the cookie
        // breaks same-tick reuse.
        if (read_environ_value(expected.pid, k_cookie_env_var) != expected.cookie) {
            return {IdentityVerdict::reused, std::nullopt};
        }
    }
    return {IdentityVerdict::same, std::move(pidfd)};
}

std::optional<Pidfd> open_verified(const ProcessIdentity& expected, const std::string& current_boot_id)
{
    auto verified = verify_identity(expected, current_boot_id);
    return std::move(verified.pidfd);
}

std::string_view to_string(IdentityVerdict verdict)
{
    switch (verdict) {
    case IdentityVerdict::same: return "same";
    case IdentityVerdict::gone: return "gone";
    case IdentityVerdict::reused: return "reused";
    case IdentityVerdict::boot_changed: return "boot_changed";
    }
    return "unknown";
}

} // namespace orch
