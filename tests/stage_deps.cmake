# cuda/stage_deps.sh: its staged prefix builds the project where Debian's packages are not
# installed (tests/test_stage_deps.sh). Label setup: not a sanitizer stage's test.
fp8sim_add_test(stage_deps COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_stage_deps.sh
  LABELS setup TIMEOUT 900)
