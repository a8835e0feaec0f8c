# Turns migrations/NNNN_name.sql into a C++ table, so each binary carries
# exactly the schema it understands, with each file's SHA-256 (common/db/migrate.cpp
# refuses a database whose applied migrations differ). Run at build time (cmake -P).
file(GLOB sql_files "${MIGRATIONS_DIR}/[0-9][0-9][0-9][0-9]_*.sql")
list(SORT sql_files)
set(body "// Generated from migrations/*.sql by cmake/embed_migrations.cmake. Do not edit.\n")
string(APPEND body "#include \"common/db/migrations_table.hpp\"\n\nnamespace orch {\n\n")
string(APPEND body "const std::vector<EmbeddedMigration>& embedded_migrations()\n{\n")
string(APPEND body "    static const std::vector<EmbeddedMigration> k_migrations = {\n")
foreach(f IN LISTS sql_files)
  get_filename_component(name "${f}" NAME_WE)
  string(SUBSTRING "${name}" 0 4 version)
  math(EXPR version "${version}")
  file(READ "${f}" sql)
  # The digest of the file's bytes, which the raw string below carries unchanged.
  file(SHA256 "${f}" digest)
  string(APPEND body "        {${version}, \"${name}\", \"${digest}\", R\"orch_sql(${sql})orch_sql\"},\n")
endforeach()
string(APPEND body "    };\n    return k_migrations;\n}\n\n} // namespace orch\n")
file(WRITE "${OUTPUT}.tmp" "${body}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
