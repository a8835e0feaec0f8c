// array_parameter (common/db/array_parameter.hpp): what PostgreSQL reads back is
// exactly the elements given, whatever characters they hold.
#include "common/db/array_parameter.hpp"
#include "tests/support/pg_fixture.hpp"

#include <catch2/catch.hpp>

using namespace orch;
using namespace orch::test;

TEST_CASE("array_parameter: PostgreSQL reads back every element as given - quotes - backslashes - commas - braces",
          "[foundation]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    const std::vector<std::string> elements{"plain", "with \"quotes\"", "back\\slash", "a,b", "{braces}", "", "NULL",
                                            " padded "};
    pqxx::nontransaction tx(*conn);
    const auto r = tx.exec_params("SELECT e FROM unnest($1::text[]) WITH ORDINALITY AS t(e, n) ORDER BY n",
                                  array_parameter(elements));
    REQUIRE(r.size() == elements.size());
    for (std::size_t i = 0; i < elements.size(); ++i) {
        CHECK_FALSE(r[static_cast<int>(i)][0].is_null());
        CHECK(r[static_cast<int>(i)][0].as<std::string>() == elements[i]);
    }
    CHECK(tx.exec_params1("SELECT cardinality($1::uuid[])", array_parameter({}))[0].as<int>() == 0);
}
