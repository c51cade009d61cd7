#include "check_build.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "build_facts.h"
#include "shell.h"

namespace chorus::launch {
namespace {

namespace fs = std::filesystem;

std::string row(bool on, const std::string& name, const std::string& text) {
  std::string line = std::string("    ") + (on ? "[X] " : "[ ] ") + name;
  line.resize(std::max<std::size_t>(line.size() + 1, 26), ' ');
  return line + text + "\n";
}

// Where a Chorus library is, for this chorusrun: installed (bin/ -> lib/), in the Python
// package (chorus/bin/ -> chorus/), or where the build made it. Empty when in none.
std::string locate(const std::string& file, const std::string& built) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(exe.parent_path() / build::kBinToLib / file);
    candidates.push_back(exe.parent_path().parent_path() / file);
  }
  candidates.emplace_back(built);
  for (const fs::path& candidate : candidates) {
    if (fs::exists(candidate, ec)) return candidate.lexically_normal().string();
  }
  return "";
}

// "loads", or the loader's reason (the first library it could not find, usually).
std::string try_load(const std::string& path) {
  // Not closed: a library's destructors (LibTorch's) may not run safely mid-process.
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) return "loads";
  const char* why = dlerror();
  return std::string("does not load: ") + (why ? why : "unknown reason");
}

std::string library_line(const std::string& file, const std::string& built) {
  std::string path = locate(file, built);
  if (path.empty()) return "    " + file + ": not found beside chorusrun nor in the build tree\n";
  return "    " + path + ": " + try_load(path) + "\n";
}

// What python3 on PATH says when asked for the package (which does not import torch).
std::string python_line() {
  const ShellOutput python = shell_output(
      "python3 -c 'import sys, chorus; print(sys.executable, \"imports chorus\", "
      "chorus.__version__, \"from\", chorus.__path__[0])' 2>&1");
  if (!python.ran) return "    python3: cannot be run\n";
  std::string out = python.text;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  if (python.status != 0) {
    std::size_t last = out.rfind('\n');
    out =
        "python3 cannot import chorus: " + (last == std::string::npos ? out : out.substr(last + 1));
  }
  return "    " + out + "\n";
}

}  // namespace

std::string version_line() { return std::string("chorusrun (Chorus) ") + build::kVersion; }

std::string check_build() {
  std::string cuda = std::string(build::kCudaVersion) + ", for GPUs " + build::kCudaArchitectures;
  std::string torch = std::string(build::kTorchVersion) +
                      (build::kTorchCuda ? ", with CUDA" : ", CPU only") + ": Chorus::torch";
  std::string python = std::string("chorus.torch for torch ") + build::kPythonTorchVersion + " (" +
                       build::kPythonExecutable + ")";
  std::string out = std::string("Chorus ") + build::kVersion + " (" + build::kBuildType + ", " +
                    build::kCompiler + ")\n\nFrameworks:\n";
  out += row(build::kTorch, "LibTorch (C++)", build::kTorch ? torch : "");
  out += row(build::kPython, "PyTorch", build::kPython ? python : "");
  out += "\nControllers:\n";
  out += row(true, "MPI", std::string(build::kMpi) + " (MPI " + build::kMpiStandard + ")");
  out += row(true, "hwloc", std::string(build::kHwloc) + ": CHORUS_BIND, --explain");
  out += row(build::kGloo, "Gloo",
             build::kGloo ? std::string(build::kGlooVersion) +
                                ": jobs without MPI (chorusrun --gloo, torchrun)"
                          : "");
  out += "\nTensor operations:\n";
  out += row(true, "MPI", "host memory; shared memory within a host");
  out += row(build::kCuda, "CUDA", build::kCuda ? cuda : "");
  out += row(build::kNccl, "NCCL", build::kNcclVersion);
  out += "\nOn this host:\n";
  out += library_line(build::kLibchorus, build::kBuiltLibchorus);
  if (build::kTorch) out += library_line(build::kLibchorusTorch, build::kBuiltLibchorusTorch);
  if (build::kPython) out += python_line();
  return out;
}

}  // namespace chorus::launch
