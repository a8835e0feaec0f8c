#!/usr/bin/env python3
"""Row 8 of scripts/bench: pages per second of a crawl of real pages with the
default plugins, against a ceiling measured in the same run.

    bench_pages.py --bin-dir DIR [--pages N] [--rounds R] [--plugins-dir DIR]
                   [--baseline-plugins-dir DIR] [--site DIR] [--database-url URL]

The site is a copy of a real documentation site on this machine (default: the
PostgreSQL 15 manual of Debian's postgresql-doc-15, 1,173 pages), served on
127.0.0.1 by counting_site_server.py for the whole run. The N pages (default
200) are taken at an even stride through its sorted *.html files, so every run
of one N archives the same pages.

Each round runs, on the same pages and the same server:
  * the ceiling: page_ceiling.py, one Chromium, one tab per snapshot worker of
    the crawl (8, the orchestrator's default), each page loaded once and
    captured (full-page screenshot, PDF, DOM), no orchestration, no database;
  * the crawl: `orchestrator add --depth 0` of the N URLs, then a one-shot
    `orchestrator --idle-window 0` with the default worker counts and the
    plugins of --plugins-dir (the repository's plugins/ by default) as the
    built-in plugins, each crawl in a fresh data directory;
  * with --baseline-plugins-dir, the same crawl with that directory's plugins
    (a copy of an older plugins/, for "today's pages/s").
Both sides are timed by the wall clock from the first process started (the
ceiling's python, the crawl's `orchestrator add`) to the last one gone. The
order alternates from round to round (ceiling, crawl, ... then ..., crawl,
ceiling); the figures are the medians of the rounds, the ratios the medians of
the rounds' own ratios. Every run starts after a CHECKPOINT and a sync.

Prints ROW lines (tests/bench/bench_report.hpp's format) and commentary,
including the per-hook wall and CPU times of the last crawl of each plugins
directory (from its `process` rows). Exits 0 when it measured, 1 on a broken
run (an orchestrator that failed, a crawl that did not seal all its pages).

The database URL defaults to TEST_DATABASE_URL; the bench works in a scratch
database of its own on that server, dropped at the end. Scratch files go under
$TMPDIR and stay there when ORCH_KEEP_TEST_DIRS=1.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))

k_site = "/usr/share/doc/postgresql-doc-15/html"
k_snapshot_workers = 8  # the orchestrator's default --max-snapshot-workers
k_goal_ceiling = 0.8
k_goal_today = 2.0


def log(msg):
    print(f"bench_pages: {msg}", file=sys.stderr, flush=True)


def row(name, ours, baseline, ratio, goal="-", met="-", window="-"):
    print("\t".join(["ROW", name, ours, baseline, ratio, goal, met, window]), flush=True)


def fixed(v, decimals=2):
    return "no data" if v is None else f"{v:.{decimals}f}"


def median(values):
    return statistics.median(values) if values else None


def machine_busy_ticks():
    """Clock ticks the machine's CPUs spent busy (not idle, not iowait) so far."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    return sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)


def cpu_ms_per_page(busy0, pages):
    return (machine_busy_ticks() - busy0) * 1000.0 / os.sysconf("SC_CLK_TCK") / pages


def children_cpu_s():
    """CPU seconds of this process's reaped descendants so far (each counted by
    the ancestor that waited for it: a crawl's hooks and Chromium through the
    orchestrator, the ceiling's Chromium through page_ceiling.py); PostgreSQL's
    backends are the server's, not ours, and are not in it."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def scratch_database_url(base, name):
    """`base` pointing at database `name` (key=value: a later keyword wins; URI: the path)."""
    if base.startswith(("postgres://", "postgresql://")):
        head, _, rest = base.partition("://")
        authority, _, tail = rest.partition("/")
        query = tail.partition("?")[2]
        return f"{head}://{authority}/{name}" + (f"?{query}" if query else "")
    return f"{base} dbname={name}"


class Database:
    """psql on one database; variables bound with -v and quoted by psql (:'name')."""

    def __init__(self, url):
        self.m_url = url

    def query(self, sql, **variables):
        argv = ["psql", self.m_url, "-qAtX", "-v", "ON_ERROR_STOP=1", "-F", "\t"]
        for key, value in variables.items():
            argv += ["-v", f"{key}={value}"]
        r = subprocess.run(argv, input=sql, capture_output=True, text=True, env=psql_env())
        if r.returncode != 0:
            raise RuntimeError(f"psql failed: {r.stderr.strip()}")
        return [line.split("\t") for line in r.stdout.splitlines() if line]

    def scalar(self, sql, **variables):
        rows = self.query(sql, **variables)
        return rows[0][0] if rows else None


def psql_env():
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    return env


def pick_pages(site, n):
    """n pages at an even stride through the site's sorted *.html files."""
    names = sorted(f for f in os.listdir(site) if f.endswith(".html"))
    if n > len(names):
        raise RuntimeError(f"{site} has {len(names)} pages, fewer than {n}")
    return [names[i * len(names) // n] for i in range(n)]


class Server:
    """counting_site_server.py on the site, for the whole bench."""

    def __init__(self, site):
        self.m_proc = subprocess.Popen([sys.executable, os.path.join(HERE, "counting_site_server.py"), site],
                                       stdout=subprocess.PIPE, text=True)
        self.base = self.m_proc.stdout.readline().strip()
        if not self.base.startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError("the site server did not start")

    def count(self, reset=False):
        import urllib.request

        with urllib.request.urlopen(self.base + "_count" + ("?reset=1" if reset else ""), timeout=10) as r:
            return json.load(r)

    def stop(self):
        if self.m_proc.poll() is None:
            self.m_proc.terminate()
            try:
                self.m_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.m_proc.kill()
                self.m_proc.wait()


class Bench:
    def __init__(self, args):
        self.m_args = args
        self.m_bin = os.path.realpath(args.bin_dir)
        self.m_scratch = tempfile.mkdtemp(prefix="bench-pages-")
        os.chmod(self.m_scratch, 0o755)
        self.m_db_name = f"bench_pages_{os.getpid()}"
        admin = Database(args.database_url)
        admin.query(f'CREATE DATABASE "{self.m_db_name}"')
        self.m_db_url = scratch_database_url(args.database_url, self.m_db_name)
        self.db = Database(self.m_db_url)
        self.m_admin = admin
        r = subprocess.run([self.orchestrator(), "--database-url", self.m_db_url, "--data-dir",
                            os.path.join(self.m_scratch, "migrate"), "migrate"],
                           capture_output=True, text=True, env=self.env(args.plugins_dir))
        if r.returncode != 0:
            raise RuntimeError(f"orchestrator migrate failed: {r.stderr.strip()[:2000]}")
        self.server = Server(args.site)
        self.pages = pick_pages(args.site, args.pages)
        self.urls = [self.server.base + p for p in self.pages]
        self.m_urls_file = os.path.join(self.m_scratch, "urls.txt")
        with open(self.m_urls_file, "w", encoding="utf-8") as fh:
            fh.write("\n".join(self.urls) + "\n")
        self.m_runs = 0
        # The hooks' python3 is the bench's own interpreter binary, first on PATH:
        # a version manager's python3 on PATH is a shell script (pyenv's shim
        # costs about 200 ms a start against 20 ms for the binary), which would
        # put the shim's cost in every hook and not in the ceiling.
        self.m_python_dir = os.path.join(self.m_scratch, "python-bin")
        os.makedirs(self.m_python_dir)
        os.symlink(os.path.realpath(sys.executable), os.path.join(self.m_python_dir, "python3"))
        log(f"hooks and the ceiling run python3 = {os.path.realpath(sys.executable)}")

    def orchestrator(self):
        return os.path.join(self.m_bin, "orchestrator")

    def env(self, plugins_dir):
        env = dict(os.environ)
        for key in ("DATABASE_URL", "PLUGINS_DIR", "PLUGINS", "MAX_CRAWL_WORKERS", "MAX_SNAPSHOT_WORKERS",
                    "HOOK_PARALLELISM", "LEASE_TTL"):
            env.pop(key, None)
        env["ORCH_BUILTIN_PLUGINS_DIR"] = os.path.realpath(plugins_dir)
        if hasattr(self, "m_python_dir"):
            env["PATH"] = self.m_python_dir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
        return env

    def settle(self):
        # As bench_crawl's settle(): earlier runs' dirty pages and files are
        # written back before the clock runs, not in the middle of the next run.
        self.db.query("CHECKPOINT")
        os.sync()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.db.scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'") != "0":
            time.sleep(0.1)

    def new_dir(self, what):
        self.m_runs += 1
        path = os.path.join(self.m_scratch, f"{self.m_runs:02d}-{what}")
        os.makedirs(path)
        return path

    def ceiling(self):
        """One run of the ceiling: {per_s, wall_s, requests, cpu_ms, ms, failed}."""
        out = self.new_dir("ceiling")
        self.settle()
        self.server.count(reset=True)
        busy0 = machine_busy_ticks()
        tree0 = children_cpu_s()
        t0 = time.monotonic()
        r = subprocess.run([os.path.realpath(sys.executable), os.path.join(HERE, "page_ceiling.py"), "--urls-file",
                            self.m_urls_file, "--out", out, "--workers", str(k_snapshot_workers)],
                           capture_output=True, text=True)
        wall = time.monotonic() - t0
        cpu = cpu_ms_per_page(busy0, len(self.urls))
        tree = (children_cpu_s() - tree0) * 1000 / len(self.urls)
        if r.returncode != 0:
            raise RuntimeError(f"page_ceiling.py exited {r.returncode}: {r.stderr.strip()[:2000]}")
        result = json.loads(r.stdout.strip().splitlines()[-1])
        requests = self.server.count()["requests"]
        run = {"per_s": len(self.urls) / wall, "wall_s": wall, "requests": requests / len(self.urls), "cpu_ms": cpu,
               "tree_ms": tree, "ms": result["ms"], "failed": result["failed"]}
        print(f"ceiling: {len(self.urls)} pages in {wall:.2f} s ({run['per_s']:.2f}/s), {run['requests']:.2f} requests "
              f"per page, machine CPU {cpu:.0f} ms per page (its own tree {tree:.0f}), median ms per page {result['ms']}, "
              f"{result['failed']} failed {result['errors']}", flush=True)
        return run

    def crawl(self, plugins_dir, tag):
        """One crawl of the pages: {per_s, wall_s, requests, cpu_ms, failed, crawl_id}."""
        data = self.new_dir(tag)
        env = self.env(plugins_dir)
        base = [self.orchestrator(), "--database-url", self.m_db_url, "--data-dir", data, "--machine-id", "bench",
                "--log-level", "warn"]
        crawl_id = str(uuid.uuid4())
        self.settle()
        self.server.count(reset=True)
        busy0 = machine_busy_ticks()
        tree0 = children_cpu_s()
        t0 = time.monotonic()
        r = subprocess.run(base + ["add", "--depth", "0", "--id", crawl_id, "--urls-file", self.m_urls_file],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError(f"orchestrator add failed: {r.stderr.strip()[:2000]}")
        with open(os.path.join(data, "orchestrator.log"), "w", encoding="utf-8") as errlog:
            r = subprocess.run(base + ["--idle-window", "0"], stdout=subprocess.DEVNULL, stderr=errlog, env=env,
                               timeout=3600)
        wall = time.monotonic() - t0
        cpu = cpu_ms_per_page(busy0, len(self.urls))
        tree = (children_cpu_s() - tree0) * 1000 / len(self.urls)
        if r.returncode != 0:
            raise RuntimeError(f"the orchestrator exited {r.returncode} (see {data}/orchestrator.log)")
        requests = self.server.count()["requests"]
        sealed, failed, running = self.db.query(
            "SELECT count(*) FILTER (WHERE status = 'sealed'), count(*) FILTER (WHERE outcome IS DISTINCT FROM "
            "'succeeded'), (SELECT count(*) FROM process WHERE status = 'running' AND crawl_id = :'c') "
            "FROM snapshot WHERE crawl_id = :'c'", c=crawl_id)[0]
        if int(sealed) != len(self.urls):
            raise RuntimeError(f"the crawl sealed {sealed} of {len(self.urls)} snapshots")
        if int(running) != 0:
            raise RuntimeError(f"the orchestrator exited with {running} of the crawl's processes still running")
        hooks_failed = self.db.scalar(
            "SELECT count(*) FROM archive_result ar JOIN snapshot s ON s.id = ar.snapshot_id "
            "WHERE s.crawl_id = :'c' AND ar.status = 'failed'", c=crawl_id)
        run = {"per_s": len(self.urls) / wall, "wall_s": wall, "requests": requests / len(self.urls), "cpu_ms": cpu,
               "tree_ms": tree, "failed": int(failed), "hooks_failed": int(hooks_failed), "crawl_id": crawl_id}
        print(f"crawl {tag}: {len(self.urls)} pages in {wall:.2f} s, add -> orchestrator gone ({run['per_s']:.2f}/s), "
              f"{run['requests']:.2f} requests per page, machine CPU {cpu:.0f} ms per page (our tree {tree:.0f}), {failed} snapshots not "
              f"succeeded, {hooks_failed} hook results failed", flush=True)
        return run

    def hook_breakdown(self, crawl_id, tag):
        """Per hook of one crawl: wall p50 / p90 / mean and CPU mean (ms), from its process rows."""
        rows = self.db.query(
            "SELECT hook_name, count(*), "
            "percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ended_at - started_at)) * 1000, "
            "percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM ended_at - started_at)) * 1000, "
            "avg(extract(epoch FROM ended_at - started_at)) * 1000, "
            "avg(coalesce(cpu_user_s, 0) + coalesce(cpu_system_s, 0)) * 1000, bool_or(snapshot_id IS NOT NULL) "
            "FROM process WHERE process_type = 'hook' AND crawl_id = :'c' AND started_at IS NOT NULL "
            "AND ended_at IS NOT NULL GROUP BY hook_name "
            "ORDER BY bool_or(snapshot_id IS NOT NULL), split_part(hook_name, '/', 2)", c=crawl_id)
        print(f"hooks of crawl {tag} (process rows, started_at -> ended_at; CPU as reaped):", flush=True)
        print("  hook\truns\twall p50 ms\twall p90 ms\twall mean ms\tCPU mean ms", flush=True)
        snapshot_hooks_mean = 0.0
        for name, runs, p50, p90, mean, cpu, per_snapshot in rows:
            print(f"  {name}\t{runs}\t{float(p50):.0f}\t{float(p90):.0f}\t{float(mean):.0f}\t{float(cpu):.0f}",
                  flush=True)
            if per_snapshot == "t":
                snapshot_hooks_mean += float(mean)
            else:
                # A crawl hook's CPU is its whole tree's (the chrome hook reaps the browser).
                print(f"  ({name}: CPU {float(cpu) / len(self.urls):.0f} ms per page)", flush=True)
        page = self.db.query(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM sealed_at - started_at)) * 1000, "
            "avg(extract(epoch FROM sealed_at - started_at)) * 1000 FROM snapshot WHERE crawl_id = :'c'",
            c=crawl_id)[0]
        print(f"  snapshot started_at -> sealed_at: p50 {float(page[0]):.0f} ms, mean {float(page[1]):.0f} ms; "
              f"its Snapshot hooks' walls add up to {snapshot_hooks_mean:.0f} ms on average", flush=True)
        return snapshot_hooks_mean, float(page[1])

    def close(self):
        self.server.stop()
        try:
            self.m_admin.query(f'DROP DATABASE IF EXISTS "{self.m_db_name}" WITH (FORCE)')
        except RuntimeError as exc:
            log(f"could not drop {self.m_db_name}: {exc}")
        if os.environ.get("ORCH_KEEP_TEST_DIRS") == "1":
            log(f"kept {self.m_scratch}")
        else:
            shutil.rmtree(self.m_scratch, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", required=True, help="the build's bin/ (orchestrator, crawl_worker, ...)")
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--plugins-dir", default=os.path.join(ROOT, "plugins"))
    parser.add_argument("--baseline-plugins-dir")
    parser.add_argument("--site", default=k_site)
    parser.add_argument("--database-url", default=os.environ.get("TEST_DATABASE_URL"))
    args = parser.parse_args()
    if not args.database_url:
        log("no database: --database-url or TEST_DATABASE_URL (scripts/bench starts one)")
        return 2
    if not os.path.isdir(args.site):
        # A row that cannot run is a broken benchmark, not a skipped one.
        row("8 real pages/s: crawl (default plugins) vs ceiling", "no data", "no data", "-",
            f">= {k_goal_ceiling:.2f}", f"NO: {args.site} missing (Debian package postgresql-doc-15)")
        return 1
    for d in filter(None, [args.plugins_dir, args.baseline_plugins_dir]):
        if not os.path.isdir(d):
            log(f"{d} is not a directory")
            return 2

    bench = Bench(args)
    try:
        n = len(bench.urls)
        log(f"{n} pages of {args.site} on {bench.server.base}, {args.rounds} rounds")
        ceilings, crawls, todays = [], [], []
        for r in range(args.rounds):
            steps = ["ceiling", "crawl"] + (["today"] if args.baseline_plugins_dir else [])
            if r % 2 == 1:
                steps.reverse()
            for step in steps:
                if step == "ceiling":
                    ceilings.append(bench.ceiling())
                elif step == "crawl":
                    crawls.append(bench.crawl(args.plugins_dir, f"crawl{r}"))
                else:
                    todays.append(bench.crawl(args.baseline_plugins_dir, f"today{r}"))

        window = (f"wall clock, first process started -> last gone, both sides; {args.rounds} rounds in "
                  f"alternating order, medians; {n} pages, {k_snapshot_workers} workers / tabs")
        defects = []
        if any(c["failed"] for c in ceilings):
            defects.append(f"{sum(c['failed'] for c in ceilings)} ceiling captures failed")
        if any(c["failed"] or c["hooks_failed"] for c in crawls):
            defects.append(f"{sum(c['failed'] for c in crawls)} snapshots not succeeded, "
                           f"{sum(c['hooks_failed'] for c in crawls)} hook results failed")
        ratio = median([c["per_s"] / ceilings[i]["per_s"] for i, c in enumerate(crawls)])
        met = ("NO: " + "; ".join(defects)) if defects else ("yes" if ratio >= k_goal_ceiling else "NO")
        row("8 real pages/s: crawl (default plugins) vs ceiling", fixed(median([c["per_s"] for c in crawls])),
            fixed(median([c["per_s"] for c in ceilings])), fixed(ratio), f">= {k_goal_ceiling:.2f}", met, window)
        row("8 context: requests per page seen by the server: crawl / ceiling",
            fixed(median([c["requests"] for c in crawls])), fixed(median([c["requests"] for c in ceilings])),
            fixed(median([c["requests"] / ceilings[i]["requests"] for i, c in enumerate(crawls)])),
            window="the server's count, all requests, over the same runs")
        row("8 context: machine CPU ms per page: crawl / ceiling", fixed(median([c["cpu_ms"] for c in crawls]), 0),
            fixed(median([c["cpu_ms"] for c in ceilings]), 0),
            fixed(median([c["cpu_ms"] / ceilings[i]["cpu_ms"] for i, c in enumerate(crawls)])),
            window="/proc/stat busy ticks over the same runs (every process of the machine: others' load too)")
        row("8 context: CPU ms per page of the run's own process tree, without PostgreSQL: crawl / ceiling",
            fixed(median([c["tree_ms"] for c in crawls]), 0), fixed(median([c["tree_ms"] for c in ceilings]), 0),
            fixed(median([c["tree_ms"] / ceilings[i]["tree_ms"] for i, c in enumerate(crawls)])),
            window="getrusage(RUSAGE_CHILDREN) over the same runs (the add, the orchestrator and all it reaped)")
        if todays:
            today_defects = [f"{sum(t['failed'] for t in todays)} snapshots not succeeded, "
                             f"{sum(t['hooks_failed'] for t in todays)} hook results failed (today's plugins)"] \
                if any(t["failed"] or t["hooks_failed"] for t in todays) else []
            today_ratio = median([c["per_s"] / todays[i]["per_s"] for i, c in enumerate(crawls)])
            today_met = ("NO: " + "; ".join(defects + today_defects)) if defects or today_defects else \
                ("yes" if today_ratio >= k_goal_today else "NO")
            row("8 real pages/s: crawl vs today's plugins (--baseline-plugins-dir)",
                fixed(median([c["per_s"] for c in crawls])), fixed(median([t["per_s"] for t in todays])),
                fixed(today_ratio), f">= {k_goal_today:.1f}", today_met, window)
            row("8 context: today's plugins: pages/s vs ceiling, requests per page",
                fixed(median([t["per_s"] for t in todays])), fixed(median([c["per_s"] for c in ceilings])),
                fixed(median([t["per_s"] / ceilings[i]["per_s"] for i, t in enumerate(todays)])),
                window=f"the same rounds; today's plugins made {fixed(median([t['requests'] for t in todays]))} "
                "requests per page")
        hooks, page = bench.hook_breakdown(crawls[-1]["crawl_id"], "crawl (--plugins-dir)")
        row("8 context: a page in a snapshot worker: its Snapshot hooks' walls / started -> sealed (mean ms)",
            fixed(hooks, 0), fixed(page, 0), fixed(hooks / page if page else None), window="process and snapshot rows of "
            "the last crawl; the per-hook split is in the log")
        if todays:
            bench.hook_breakdown(todays[-1]["crawl_id"], "today (--baseline-plugins-dir)")
        return 0
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        row("8 real pages/s: crawl (default plugins) vs ceiling", "no data", "no data", "-",
            f">= {k_goal_ceiling:.2f}", f"NO: {str(exc)[:300]}")
        log(str(exc))
        return 1
    finally:
        bench.close()


if __name__ == "__main__":
    sys.exit(main())
