# orch_program(NAME sources...): one of the three executables. Its sources go
# into NAME_core (a static library the tests link too); NAME itself is its
# main.cpp over that library.
function(orch_program name)
  add_library(${name}_core STATIC ${ARGN})
  target_link_libraries(${name}_core PUBLIC common PRIVATE project_settings project_warnings)
  add_executable(${name} main.cpp)
  target_link_libraries(${name} PRIVATE ${name}_core project_settings project_warnings)
endfunction()
