#include "tests/support/row_history.hpp"

#include "tests/support/db_query.hpp"

#include <pqxx/pqxx>

namespace orch::test {

void record_row_history(const std::string& url, const std::string& table)
{
    pqxx::connection conn(url);
    // clock_timestamp(), not now(): a write's own moment, not its transaction's start.
    execute(conn, "CREATE TABLE IF NOT EXISTS test_row_history ("
                  "  seq bigserial PRIMARY KEY, tbl text NOT NULL, op text NOT NULL, old jsonb, new jsonb,"
                  "  txid bigint NOT NULL, at timestamptz NOT NULL);"
                  "CREATE OR REPLACE FUNCTION test_row_history_record() RETURNS trigger LANGUAGE plpgsql AS $$ "
                  "BEGIN "
                  "  INSERT INTO test_row_history (tbl, op, old, new, txid, at) "
                  "  VALUES (TG_TABLE_NAME, TG_OP, CASE WHEN TG_OP = 'UPDATE' THEN to_jsonb(OLD) END, to_jsonb(NEW), "
                  "          txid_current(), clock_timestamp()); "
                  "  RETURN NULL; "
                  "END $$;");
    pqxx::nontransaction tx(conn);
    tx.exec0("CREATE TRIGGER " + tx.quote_name("test_row_history_" + table) + " AFTER INSERT OR UPDATE ON " +
             tx.quote_name(table) + " FOR EACH ROW EXECUTE FUNCTION test_row_history_record()");
}

} // namespace orch::test
