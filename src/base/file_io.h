#pragma once
// Whole writes and reads of files, for what Chorus writes while a job runs (the timeline, the
// flight records) and the tools that read it back: loops over short writes and EINTR, and a
// file replaced whole, so that a reader never sees half of it.
//
// Errors are errno values (0: done), for the callers to put in their own messages.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace chorus {

/// Writes all of `data` to `fd` at `offset`.
int pwrite_all(int fd, std::string_view data, int64_t offset);
/// Reads exactly `size` bytes of `fd` at `offset` into `out` (EIO if the file is shorter).
int pread_all(int fd, char* out, std::size_t size, int64_t offset);
/// Writes `text` to `path`.tmp, then renames it over `path`. With `keep_open`, *keep_open
/// becomes the new file's descriptor, open for reading and writing (the caller closes it);
/// otherwise it is closed. Nothing is left behind on failure.
int replace_file(const std::string& path, std::string_view text, int* keep_open = nullptr);
/// The same with the file's text in parts, written one after the other (no copy joins them).
int replace_file(const std::string& path, std::initializer_list<std::string_view> parts,
                 int* keep_open = nullptr);

}  // namespace chorus
