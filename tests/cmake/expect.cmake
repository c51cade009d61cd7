# Checks for the script-mode tests of cmake/: a mismatch stops the script with an error, which
# fails the CTest test.

# expect(<var> <value>): <var> holds exactly <value>.
function(expect var value)
  if(NOT "${${var}}" STREQUAL "${value}")
    message(FATAL_ERROR "${var} is '${${var}}', expected '${value}'")
  endif()
endfunction()

# expect_match(<var> <regex>): <var> matches <regex>.
function(expect_match var regex)
  if(NOT "${${var}}" MATCHES "${regex}")
    message(FATAL_ERROR "${var} is '${${var}}', expected a match of '${regex}'")
  endif()
endfunction()
