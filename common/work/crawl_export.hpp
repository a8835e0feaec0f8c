#pragma once

#include "common/archive/wacz_package.hpp"

#include <pqxx/pqxx>

#include <filesystem>
#include <string>
#include <vector>

// A crawl as a WACZ: what the database says goes into it (its WARC files, its
// pages), then the package written (common/archive/wacz_package.hpp).
namespace orch {

struct CrawlExport {
    std::string status;               // the crawl's status: queued, started, paused, sealed
    WaczInput input;                  // warcs empty when the crawl recorded none
    std::vector<std::string> notes;   // WARC files listed but missing on disk (left out)
};

// Reads the crawl `crawl_id` (a checked UUID): its WARC files are the output
// files of its snapshots' latest attempts (archive_result.output_files, one
// row per hook) whose names end in `.warc.gz` or `.warc`, found under
// `data_dir`/snapshots/<snapshot>/<plugin>/, never by scanning a directory;
// its pages are its succeeded snapshots, oldest first (seeds in the order of
// the crawl's URLs), with their start time
// and title. A name taken twice is prefixed with its snapshot id. One read
// transaction. Throws NotFound for an unknown crawl, and what libpqxx throws.
CrawlExport read_crawl_export(pqxx::connection& conn, const std::string& crawl_id,
                              const std::filesystem::path& data_dir);

// read_crawl_export, then write_wacz to `target`; the notes of both go to
// `notes`. `require_sealed`: a crawl that is not sealed is refused with
// ExitCode::not_sealed. Throws NotFound for an unknown crawl or one with no
// WARC file, InvalidInput naming `target` when its directory cannot take the
// file, and what write_wacz throws otherwise (no file is left behind).
WaczResult export_crawl_wacz(pqxx::connection& conn, const std::string& crawl_id,
                             const std::filesystem::path& data_dir, const std::filesystem::path& target,
                             bool require_sealed, std::vector<std::string>& notes);

} // namespace orch
