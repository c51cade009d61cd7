#pragma once
/// \file
/// CHORUS_API marks what libchorus exports: the public API of these headers. The library
/// is built with hidden visibility, so nothing else of it is visible to a program.

#if defined(__GNUC__) || defined(__clang__)
#define CHORUS_API __attribute__((visibility("default")))
#else
#define CHORUS_API
#endif
