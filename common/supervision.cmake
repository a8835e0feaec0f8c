# Process supervision core: identity, containment, launch, watch, teardown, recovery.
target_sources(common PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/pidfd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/process_identity.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cgroup_leaf.cpp
  ${CMAKE_CURRENT_LIST_DIR}/containment.cpp
  ${CMAKE_CURRENT_LIST_DIR}/proc_sweep.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pending_statement.cpp
  ${CMAKE_CURRENT_LIST_DIR}/process_table.cpp
  ${CMAKE_CURRENT_LIST_DIR}/process_exit_writes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/random_id.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rerun_script.cpp
  ${CMAKE_CURRENT_LIST_DIR}/file_tail.cpp
  ${CMAKE_CURRENT_LIST_DIR}/child_environment.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clone3_trampoline.cpp
  ${CMAKE_CURRENT_LIST_DIR}/launcher.cpp
  ${CMAKE_CURRENT_LIST_DIR}/supervised_tree.cpp
  ${CMAKE_CURRENT_LIST_DIR}/supervisor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/supervised_launch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/launch_reservation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/deferred_running.cpp
  ${CMAKE_CURRENT_LIST_DIR}/teardown.cpp
  ${CMAKE_CURRENT_LIST_DIR}/adopted_orphans.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recovery.cpp)
