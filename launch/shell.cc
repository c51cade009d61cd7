#include "shell.h"

#include <array>
#include <cstdio>

namespace chorus::launch {

ShellOutput shell_output(const char* command) {
  ShellOutput out;
  FILE* p = popen(command, "r");
  if (!p) return out;
  out.ran = true;
  std::array<char, 512> chunk;
  while (std::fgets(chunk.data(), chunk.size(), p)) out.text += chunk.data();
  out.status = pclose(p);
  return out;
}

}  // namespace chorus::launch
