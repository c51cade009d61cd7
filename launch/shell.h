#pragma once
// Running a shell command for its output: the launcher asks srun which MPI plugins it has
// and python3 whether it imports the package.

#include <string>

namespace chorus::launch {

struct ShellOutput {
  bool ran = false;  ///< the shell could be started
  int status = -1;   ///< pclose()'s status: 0 when the command succeeded
  std::string text;  ///< what it wrote (stdout; redirect stderr in the command to keep it)
};

/// Runs `command` with /bin/sh and reads all it writes.
ShellOutput shell_output(const char* command);

}  // namespace chorus::launch
